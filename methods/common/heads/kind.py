"""The head protocol of ``scripts/train_drafter.py``: what differs between draft-head kinds.

The script is one loop (data, optimiser, clock, evaluation, checkpoints); a :class:`HeadKind`
supplies the rest: the target features the head reads, a fresh head, its loss on one
sequence, its depth-1 logits (held-out accuracy, comparable across kinds), an optional fit
after training (calibration) and its checkpoint. Kinds are found by name in
:data:`HEAD_KINDS` (``kind -> "module:Class"``) or by an import path given as the kind, so a
new kind is one module (plus one line here to give it a short name).
"""

from __future__ import annotations

import importlib
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from methods.common.heads.checkpoint import save_checkpoint
from racer_bench.engine.target import HFTarget
from racer_bench.errors import ConfigError

HEAD_KINDS: dict[str, str] = {
    "medusa": "methods.medusa.kind:MedusaKind",
    "eagle3": "methods.eagle3.kind:Eagle3Kind",
    "dspark": "methods.dspark.kind:DSparkKind",
}


@dataclass
class Sample:
    """One training sequence: features FloatTensor[T, F] (float16), ids and draft labels [T]."""

    feats: torch.Tensor
    ids: torch.Tensor
    labels: torch.Tensor  # -100 in the prompt (not the target's own output) and off-vocabulary
    prompt_len: int


class HeadKind:
    """One kind of draft head as the training loop sees it.

    ``settings`` is the ``head:`` group of ``conf/train/config.yaml`` (each kind reads the keys
    it uses). Subclasses set ``name`` and implement :meth:`build`, :meth:`loss` and
    :meth:`depth1_logits`; the defaults read fused low/mid/high features, fit nothing after
    training and write ``{kind, config, state}`` checkpoints.
    """

    name: ClassVar[str]

    def __init__(self, settings: Any) -> None:
        self.settings = settings

    def feature_layers(self, target: HFTarget) -> tuple[int, ...]:
        """HF ``hidden_states`` indices the head reads (empty = the final normed state)."""
        if self.settings.feature_layers:
            return tuple(self.settings.feature_layers)
        n = int(target.model.config.num_hidden_layers)
        return (min(2, n), max(n // 2, 1), max(n - 3, 1))  # EAGLE-3's low/mid/high

    def build(
        self, target: HFTarget, draft_ids: torch.Tensor, feature_size: int
    ) -> tuple[nn.Module, dict[str, Any]]:
        """A fresh head over draft vocabulary ``draft_ids`` LongTensor[Vd] reading features of
        ``feature_size``, and its config (saved in the checkpoint, part of the resume key)."""
        raise NotImplementedError

    def loss(
        self, head: Any, sample: Sample, rng: random.Random
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """The head's loss on one sequence and its logged parts."""
        raise NotImplementedError

    def depth1_logits(self, head: Any, sample: Sample) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher-forced logits FloatTensor[N, Vd] for the first drafted position after every
        root ``t`` of the answer (``prompt_len <= t <= T - 2``: the head has the features up to
        ``t - 1`` and predicts ``t + 1``), and the draft labels LongTensor[N] of ``t + 1``."""
        raise NotImplementedError

    def calibrate(self, head: Any, held: list[Sample]) -> dict[str, Any] | None:
        """Fit what is fitted after training on held-out sequences; None: nothing to fit."""
        return None

    def save(self, path: Path, head: nn.Module, config: dict[str, Any]) -> None:
        """Write the checkpoint the kind's drafter loads (``method.checkpoint``)."""
        save_checkpoint(path, self.name, config, head)


def head_kind(name: str) -> type[HeadKind]:
    """The class of kind ``name``: a key of :data:`HEAD_KINDS` or an import path
    ``module:Class``."""
    path = HEAD_KINDS.get(name, name)
    module, _, attr = path.partition(":")
    if not attr:
        raise ConfigError(
            f"kind={name}: allowed values are {', '.join(HEAD_KINDS)} or module:Class"
        )
    return getattr(importlib.import_module(module), attr)


def answer_roots(sample: Sample) -> torch.Tensor:
    """Roots LongTensor[N] of :meth:`HeadKind.depth1_logits`: every answer position but the
    last."""
    return torch.arange(sample.prompt_len, len(sample.ids) - 1)


def start_from_target(head: nn.Module, target: HFTarget, draft_ids: torch.Tensor) -> None:
    """Copy the target's LM head rows of the draft vocabulary (and its token embedding, if the
    head has one) into a fresh head."""
    lm = target.head.weight.detach().float().cpu()
    head.lm_head.weight.data.copy_(lm[draft_ids])
    embed = getattr(head, "embed_tokens", None)
    if embed is not None:
        embed.weight.data.copy_(target.model.get_input_embeddings().weight.float().cpu())


def attention_settings(settings: Any, target: HFTarget, layers: tuple[int, ...]) -> dict:
    """Config entries of an attention head (EAGLE-3, DSpark) from ``settings`` and the target."""
    mc = target.model.config
    return {
        "num_heads": settings.attn_heads,
        "intermediate_size": settings.intermediate_size,
        "rope_theta": float(getattr(mc, "rope_theta", None) or 10000.0),
        "rms_eps": float(getattr(mc, "rms_norm_eps", 1e-6)),
        "feature_layers": layers,
    }
