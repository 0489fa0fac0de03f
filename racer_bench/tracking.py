"""Experiment-tracker adapter (W&B). The run folder stays the source of truth."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from omegaconf import DictConfig


class Tracker(Protocol):
    """What the runner calls; implementations must never block or lose the run folder."""

    def log_summary(self, summary: dict[str, Any], run_dir: Path) -> None: ...

    def finish(self, failed: bool = False) -> None: ...


class NullTracker:
    """``logger=none``: nothing is sent anywhere."""

    def log_summary(self, summary: dict[str, Any], run_dir: Path) -> None:
        pass

    def finish(self, failed: bool = False) -> None:
        pass


def start(cfg: DictConfig, run_dir: Path, choices: dict[str, str]) -> Tracker:
    """The tracker selected by ``cfg.logger`` (``mode: disabled`` -> :class:`NullTracker`)."""
    logger = cfg.get("logger") or {}
    if logger.get("mode", "disabled") == "disabled":
        return NullTracker()
    raise NotImplementedError(f"logger.mode={logger.get('mode')}: not available yet")
