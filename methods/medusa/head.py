"""Medusa-1 heads: K residual blocks on the target's last hidden state, each read by a frozen
copy of the target's LM head restricted to a draft vocabulary; their loss and checkpoint."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from methods.common.heads.checkpoint import load_checkpoint


class ResBlock(nn.Module):
    """Medusa's ``x + SiLU(W x)``; zero-initialised, so an untrained head copies the LM head."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.linear = nn.Linear(size, size)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + F.silu(self.linear(x))


class MedusaHeads(nn.Module):
    """K Medusa heads sharing one frozen LM head over the draft vocabulary."""

    def __init__(self, hidden_size: int, num_heads: int, num_layers: int, draft_ids: torch.Tensor):
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(*[ResBlock(hidden_size) for _ in range(num_layers)])
            for _ in range(num_heads)
        )
        self.lm_head = nn.Linear(hidden_size, len(draft_ids), bias=False)
        self.lm_head.weight.requires_grad_(False)
        self.register_buffer("draft_ids", draft_ids.long().clone())

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """FloatTensor[T, H] -> logits FloatTensor[K, T, Vd]; head k predicts k + 2 ahead."""
        return torch.stack([self.lm_head(block(hidden)) for block in self.blocks])


def medusa_loss(
    heads: MedusaHeads, hidden: torch.Tensor, labels: torch.Tensor, decay: float = 0.8
) -> torch.Tensor:
    """Medusa-1 loss on one sequence: head k at position t predicts ``labels[t + k + 2]``.

    Args:
        hidden: FloatTensor[T, H] target last hidden states; labels: LongTensor[T] draft labels.
    """
    logits = heads(hidden)  # [K, T, Vd]
    total = hidden.new_zeros(())
    for k in range(len(logits)):
        shift = k + 2
        if len(labels) <= shift:
            break
        target = labels[shift:]
        loss = F.cross_entropy(logits[k, : len(target)], target, ignore_index=-100)
        if torch.isfinite(loss):
            total = total + decay**k * loss
    return total


def load_medusa(path: str) -> MedusaHeads:
    """Medusa heads trained by ``scripts/train_drafter.py kind=medusa``."""
    data = load_checkpoint(path, "medusa")
    cfg = data["config"]
    heads = MedusaHeads(
        cfg["hidden_size"], cfg["num_heads"], cfg["num_layers"], data["state"]["draft_ids"]
    )
    heads.load_state_dict(data["state"])
    return heads
