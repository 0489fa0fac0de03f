"""Training data for the model drafters (EAGLE-3, Medusa, DSpark heads): prompts and the
target's own answers to distil (scripts/train_drafter.py trains on them)."""
