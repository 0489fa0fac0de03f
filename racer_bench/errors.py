"""User-facing errors: the CLI prints them as one line and exits with status 2 (or 128 + signal)."""

from __future__ import annotations

import signal


class ConfigError(ValueError):
    """A bad configuration value; the message names the key and what is allowed."""


class RunStopped(KeyboardInterrupt):
    """A run stopped by a signal (Ctrl-C, SIGTERM); finished prompts are on disk.

    Its message is the one line the CLI prints, e.g. ``stopped after 3 of 40 prompts; continue
    with resume=<run folder>``.
    """

    def __init__(self, message: str, signum: int = signal.SIGINT) -> None:
        super().__init__(message)
        self.signum = int(signum)

    @property
    def exit_status(self) -> int:
        """128 + the signal number, as a shell reports a process killed by it (130, 143)."""
        return 128 + self.signum


def find_config_error(error: BaseException) -> ConfigError | None:
    """The ConfigError behind ``error`` (Hydra and OmegaConf wrap errors raised inside them)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, ConfigError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
