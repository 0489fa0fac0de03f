"""A toy head kind in one module: one linear map from the target's final state to the token
two ahead (registered by ``test_head_kinds.py``; the training script is not edited)."""

from __future__ import annotations

import random
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from methods.common.heads.kind import HeadKind, Sample, answer_roots
from racer_bench.engine.target import HFTarget


class ToyHead(nn.Module):
    """Logits FloatTensor[T, Vd] of features FloatTensor[T, F]."""

    def __init__(self, feature_size: int, draft_ids: torch.Tensor) -> None:
        super().__init__()
        self.proj = nn.Linear(feature_size, len(draft_ids))
        self.register_buffer("draft_ids", draft_ids.long().clone())

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        return self.proj(feats)


class ToyKind(HeadKind):
    name = "toy"

    def feature_layers(self, target: HFTarget) -> tuple[int, ...]:
        return ()

    def build(
        self, target: HFTarget, draft_ids: torch.Tensor, feature_size: int
    ) -> tuple[nn.Module, dict[str, Any]]:
        return ToyHead(feature_size, draft_ids), {"feature_size": feature_size}

    def loss(
        self, head: Any, sample: Sample, rng: random.Random
    ) -> tuple[torch.Tensor, dict[str, float]]:
        logits = head(sample.feats.float()[:-2])  # position t predicts t + 2
        loss = F.cross_entropy(logits, sample.labels[2:], ignore_index=-100)
        return loss, {"answer_tokens": float((sample.labels[2:] >= 0).sum())}

    def depth1_logits(self, head: Any, sample: Sample) -> tuple[torch.Tensor, torch.Tensor]:
        roots = answer_roots(sample)
        return head(sample.feats.float()[roots - 1]), sample.labels[roots + 1]
