"""Grouped-query SDPA for masked multi-token forwards, registered with transformers.

transformers' SDPA path copies every cached key and value ``num_heads / num_kv_heads`` times
(``repeat_kv``) whenever a custom mask comes with more than one query token, i.e. on every tree
step. Here the query heads sharing a key/value head are stacked along the query axis instead,
``[B, H, T, D] -> [B, H_kv, G * T, D]``, with the mask repeated ``G`` times along that axis, so
attention runs on the cached keys and values as they are. Everything else (no mask, one query
token, position biases) goes to transformers' own SDPA function.

It is registered under :data:`NAME` for both the attention and the mask interfaces, so a model
switches with ``model.set_attn_implementation(NAME)`` and no model code changes.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

NAME = "racer_grouped_sdpa"

_last_mask: list[Any] = [None, 0, None]  # (mask, groups, grouped mask): one entry per step


def grouped_mask(mask: torch.Tensor, groups: int) -> torch.Tensor:
    """FloatTensor[B, 1, T, L] -> [B, 1, G * T, L], row ``g * T + t`` = row ``t``.

    The same mask object reaches every layer of a forward, so the repeat is done once.
    """
    if _last_mask[0] is mask and _last_mask[1] == groups:
        return _last_mask[2]
    b, _, t, length = mask.shape
    out = mask.expand(b, groups, t, length).reshape(b, 1, groups * t, length)
    _last_mask[:] = [mask, groups, out]
    return out


def grouped_sdpa(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention over query [B, H, T, D] and cached key/value [B, H_kv, L, D] -> [B, T, H, D]."""
    groups = getattr(module, "num_key_value_groups", 1)
    b, heads, t, dim = query.shape
    if (
        attention_mask is None
        or attention_mask.dtype == torch.bool
        or attention_mask.shape[1] != 1
        or groups == 1
        or t == 1
        or kwargs.get("position_bias") is not None
        or (module.training and dropout > 0)
    ):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
            is_causal=is_causal, **kwargs,
        )  # fmt: skip
    kv_heads = key.shape[1]
    stacked = query.reshape(b, kv_heads, groups * t, dim)
    if attention_mask.shape[-1] != key.shape[2]:
        attention_mask = attention_mask[..., : key.shape[2]]
    mask = grouped_mask(attention_mask, groups)
    out = F.scaled_dot_product_attention(stacked, key, value, attn_mask=mask, scale=scaling)
    return out.reshape(b, heads, t, dim).transpose(1, 2).contiguous(), None


def register() -> str:
    """Register the function (idempotent) and return its implementation name."""
    AttentionInterface.register(NAME, grouped_sdpa)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    return NAME
