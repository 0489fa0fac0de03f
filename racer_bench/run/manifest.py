"""The one manifest builder: what a run folder's ``manifest.json`` says about the run on either
backend (model, method and its version, verifier, task, dtype, seed, token limit, config), on top
of the code, package and hardware record of :func:`racer_bench.record.folder.manifest`."""

from __future__ import annotations

import time
from typing import Any

from omegaconf import DictConfig, OmegaConf

from racer_bench.config.paths import REPO_ROOT
from racer_bench.record import folder as records
from racer_bench.tasks.base import Task


def run_manifest(
    cfg: DictConfig,
    choices: dict[str, str],
    target: Any,
    drafter: Any,
    task: Task,
    max_new_tokens: int,
    **backend_fields: Any,
) -> dict[str, Any]:
    """The manifest of a run; ``backend_fields`` add what only one backend knows (the native
    loop's engine choice and threads, vLLM's engines) and may override a shared field."""
    fields: dict[str, Any] = {
        "model": choices.get("model"),
        "model_name": target.name,
        "method": choices.get("method"),
        "method_version": getattr(drafter, "version", None),
        "verifier": choices.get("verifier"),
        "task": choices.get("task"),
        "task_version": task.version,
        "choices": {k: v for k, v in choices.items() if not k.startswith("hydra")},
        "dtype": str(target.dtype).removeprefix("torch."),
        "seed": cfg.seed,
        "max_new_tokens": max_new_tokens,
        "persist_across_prompts": bool(getattr(drafter, "persist_across_prompts", False)),
    }
    checkpoint = getattr(drafter, "checkpoint_sha256", None)
    if checkpoint is not None:  # model drafters: which weights, not only which code
        fields["method_checkpoint_sha256"] = checkpoint
    fields |= backend_fields
    fields["started"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    fields["config"] = OmegaConf.to_container(cfg, resolve=True)
    return records.manifest(fields, REPO_ROOT)
