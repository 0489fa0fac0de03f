"""Benchmark tasks: prompts, rendering with each model's own template, and scoring."""
