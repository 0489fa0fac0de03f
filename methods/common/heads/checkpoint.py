"""Checkpoint files of the trained draft heads: ``{kind, config, state}``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from racer_bench.errors import ConfigError


def save_checkpoint(path: Path, kind: str, config: dict[str, Any], module: nn.Module) -> None:
    """Write ``{kind, config, state}`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save({"kind": kind, "config": config, "state": module.state_dict()}, tmp)
    tmp.rename(path)


def load_checkpoint(path: str, kind: str) -> dict[str, Any]:
    """A checkpoint written by :func:`save_checkpoint`; ConfigError names the fix if missing."""
    file = Path(path).expanduser()
    if not file.exists():
        raise ConfigError(
            f"method.checkpoint={path}: no such file; train it with "
            f"python scripts/train_drafter.py kind={kind} (or set method.checkpoint=null)"
        )
    data = torch.load(file, map_location="cpu", weights_only=False)
    if data.get("kind") != kind:
        raise ConfigError(f"method.checkpoint={path}: holds {data.get('kind')}, not {kind}")
    return data
