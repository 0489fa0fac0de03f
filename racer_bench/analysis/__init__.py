"""The results side: per-prompt records, metrics, summaries, tidy frames, plots, tracking."""
