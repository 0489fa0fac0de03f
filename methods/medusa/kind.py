"""Medusa as a head kind of ``scripts/train_drafter.py`` (:mod:`methods.common.heads.kind`)."""

from __future__ import annotations

import random
from typing import Any

import torch
from torch import nn

from methods.common.heads.kind import HeadKind, Sample, answer_roots, start_from_target
from methods.medusa.head import MedusaHeads, medusa_loss
from racer_bench.engine.target import HFTarget


class MedusaKind(HeadKind):
    """K Medusa-1 heads on the target's final normed state (``head.num_heads``,
    ``head.num_layers``)."""

    name = "medusa"

    def feature_layers(self, target: HFTarget) -> tuple[int, ...]:
        return ()

    def build(
        self, target: HFTarget, draft_ids: torch.Tensor, feature_size: int
    ) -> tuple[nn.Module, dict[str, Any]]:
        s = self.settings
        hidden = int(target.head.weight.shape[1])
        head = MedusaHeads(hidden, s.num_heads, s.num_layers, draft_ids)
        start_from_target(head, target, draft_ids)
        return head, {"hidden_size": hidden, "num_heads": s.num_heads, "num_layers": s.num_layers}

    def loss(
        self, head: Any, sample: Sample, rng: random.Random
    ) -> tuple[torch.Tensor, dict[str, float]]:
        return medusa_loss(head, sample.feats.float(), sample.labels), {}

    def depth1_logits(self, head: Any, sample: Sample) -> tuple[torch.Tensor, torch.Tensor]:
        roots = answer_roots(sample)  # head 0 at t - 1 predicts t + 1 (it never sees the root)
        logits = head.lm_head(head.blocks[0](sample.feats.float()[roots - 1]))
        return logits, sample.labels[roots + 1]
