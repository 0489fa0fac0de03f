"""User-facing errors: the CLI prints them as one line and exits with status 2."""

from __future__ import annotations


class ConfigError(ValueError):
    """A bad configuration value; the message names the key and what is allowed."""
