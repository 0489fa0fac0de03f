"""Held-out evaluation of a head: mean loss and teacher-forced depth-1 accuracies."""

from __future__ import annotations

import random
from typing import Any

import torch
from omegaconf import DictConfig


@torch.no_grad()
def eval_loss(kind: Any, head: Any, held: list[Any], seed: int) -> float | None:
    """Mean loss over held-out sequences (fixed random choices), or None without any."""
    if not held:
        return None
    rng = random.Random(seed)
    losses = [float(kind.loss(head, s, rng)[0]) for s in held]
    return sum(losses) / len(losses)


@torch.no_grad()
def depth1_accuracy(kind: Any, head: Any, held: list[Any], k: int = 4) -> dict[str, float]:
    """Held-out teacher-forced acceptance of the first drafted position: ``acc1`` (argmax ==
    the target's token) and ``acc{k}`` (the target's token among the top ``k``) over every
    answer position; a token outside the draft vocabulary counts as a miss. Every kind answers
    the same question (``depth1_logits`` of ``methods.common.heads.kind.HeadKind``), so the
    accuracies
    compare."""
    hits1 = hitsk = total = 0
    for s in held:
        logits, labels = kind.depth1_logits(head, s)
        top = logits.topk(min(k, logits.shape[-1]), -1).indices
        hits1 += int((top[:, 0] == labels).sum())
        hitsk += int((top == labels[:, None]).any(-1).sum())
        total += len(labels)
    return {"acc1": hits1 / max(total, 1), f"acc{k}": hitsk / max(total, 1)}


def evaluate(cfg: DictConfig, kind: Any, head: Any, held: list[Any], step: int) -> dict[str, Any]:
    """One held-out evaluation: loss and depth-1 accuracies (head left in training mode)."""
    return {"step": step, "loss": eval_loss(kind, head, held, cfg.seed),
            **depth1_accuracy(kind, head, held)}  # fmt: skip
