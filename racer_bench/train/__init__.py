"""Training of the model drafters (EAGLE-3, Medusa, DSpark heads) by self-distillation: the
prompts and the target's own answers to distil, target features, the training loop with its
evaluation, resumable states and outputs (``scripts/train_drafter.py`` hands it the head kinds
of ``methods/``)."""
