"""What the model drafters (Medusa, EAGLE-3, DSpark) share: the drafter base (drafter), the
attention layers (layers), the checkpoint files (checkpoint) and the training protocol (kind)."""
