"""EAGLE-3 as a head kind of ``scripts/train_drafter.py`` (:mod:`methods.common.heads.kind`)."""

from __future__ import annotations

import random
from typing import Any

import torch
from torch import nn

from methods.common.heads.kind import (
    HeadKind,
    Sample,
    answer_roots,
    attention_settings,
    start_from_target,
)
from methods.eagle3.head import Eagle3Head, eagle3_config, eagle3_loss, eagle3_step_logits
from racer_bench.engine.target import HFTarget


class Eagle3Kind(HeadKind):
    """One decoder layer on fused features, trained by training-time test
    (``head.ttt_steps``, ``head.attn_heads``, ``head.intermediate_size``)."""

    name = "eagle3"

    def build(
        self, target: HFTarget, draft_ids: torch.Tensor, feature_size: int
    ) -> tuple[nn.Module, dict[str, Any]]:
        hidden = int(target.head.weight.shape[1])
        common = attention_settings(self.settings, target, self.feature_layers(target))
        config = eagle3_config(hidden, feature_size, target.vocab_size, **common)
        head = Eagle3Head(config, draft_ids)
        start_from_target(head, target, draft_ids)
        return head, config

    def loss(
        self, head: Any, sample: Sample, rng: random.Random
    ) -> tuple[torch.Tensor, dict[str, float]]:
        feats, steps = sample.feats.float(), self.settings.ttt_steps
        return eagle3_loss(head, feats, sample.ids, sample.labels, steps=steps), {}

    def depth1_logits(self, head: Any, sample: Sample) -> tuple[torch.Tensor, torch.Tensor]:
        roots = answer_roots(sample)  # pair t - 1 = (feats[t - 1], ids[t]) predicts t + 1
        logits = eagle3_step_logits(head, sample.feats.float(), sample.ids, 1)[0][roots - 1]
        return logits, sample.labels[roots + 1]
