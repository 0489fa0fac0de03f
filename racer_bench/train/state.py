"""Resumable training states: the identity of a training setup, and the head, optimiser and
progress written atomically beside the checkpoint."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from racer_bench.errors import ConfigError
from racer_bench.system import files


def training_fingerprint(kind: str, config: dict, draft_ids: torch.Tensor, keys: list[str]) -> str:
    """Identity of a training setup: a state is resumed only under the same one."""
    raw = json.dumps([kind, config, draft_ids.tolist(), sorted(keys)], default=str)
    return hashlib.sha1(raw.encode()).hexdigest()


def resume_state(cfg: DictConfig, path: Path, head: Any, opt: Any, fingerprint: str) -> dict:
    """The progress of the state at ``path`` loaded into ``head`` and ``opt`` (``resume=true``
    and a state of the same setup), else a fresh start; a state of another setup is refused."""
    fresh = {"step": 0, "log": [], "evals": [], "train_s": 0.0}
    if not (cfg.resume and path.exists()):
        return fresh
    state = torch.load(path, map_location="cpu", weights_only=False)
    if state.get("fingerprint") != fingerprint:
        raise ConfigError(
            f"resume: {path} was trained with other data or head settings; delete it, set "
            "resume=false, or set out=<another checkpoint path>"
        )
    head.load_state_dict(state["head"])
    opt.load_state_dict(state["opt"])
    return {**fresh, **{k: state[k] for k in fresh if k in state}}


def save_state(path: Path, head: Any, opt: Any, fingerprint: str, progress: dict[str, Any]) -> None:
    """Head, optimiser, fingerprint and progress (step, log, evals, train_s), atomically."""
    with files.replacing(path) as tmp:
        torch.save({"head": head.state_dict(), "opt": opt.state_dict(),
                    "fingerprint": fingerprint, **progress}, tmp)  # fmt: skip
