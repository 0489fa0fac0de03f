"""Recorded outputs replayed through drafters, without the model."""
