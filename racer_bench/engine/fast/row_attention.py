"""Row-invariant attention (``csrc/row_attention.c``) for the fast engine, via transformers.

Every decode or verification forward of up to :data:`MAX_ROWS` tokens computes each query row
alone over the keys its mask lets it see, in key order, skipping masked keys (the C source says
why that makes a tree node's output equal, bit for bit, to the 1-token step over the same
prefix). Registered with transformers under :data:`NAME` for the attention and mask
interfaces, so a model switches with ``model.set_attn_implementation(NAME)``.

What falls back to the grouped SDPA of :mod:`racer_bench.engine.fast.attention` (not row-invariant):
prefills longer than :data:`MAX_ROWS`, float64 models, batches, additive masks with biases
other than 0 / -inf, attention soft-capping, sinks and position biases.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from racer_bench.engine.fast import attention, kernel_library, small_gemm

NAME = "racer_row_attention"
MAX_ROWS = small_gemm.MAX_ROWS
_visible_cache: dict[Any, tuple[Any, torch.Tensor | None]] = {}


def visible_rows(mask: torch.Tensor | None, rows: int, length: int) -> torch.Tensor | None:
    """Which keys each query row sees: uint8 Tensor[rows, length], or None for "all of them".

    ``mask`` is transformers' [B, 1, rows, >=length] boolean mask (True = attend) or additive
    float mask (0 = attend); without one, the rows are the last ``rows`` positions, causal.
    Returns None as well when an additive mask carries other biases than 0 and -inf (the caller
    then falls back). One mask object serves every layer of a forward, so it is cached.
    """
    key = (id(mask), rows, length) if mask is not None else ("causal", rows, length)
    hit = _visible_cache.get(key)
    if hit is not None and hit[0] is mask:
        return hit[1]
    if mask is None:
        if rows == 1:
            return None
        cols = torch.arange(length)
        seen = cols[None, :] <= (length - rows + torch.arange(rows))[:, None]
    else:
        plane = mask[0, 0, :, :length]
        if plane.dtype == torch.bool:
            seen = plane
        else:
            seen = plane == 0
            if not bool(torch.all(seen | (plane <= torch.finfo(plane.dtype).min / 2))):
                seen = None
    visible = None if seen is None else seen.to(torch.uint8).contiguous()
    if len(_visible_cache) > 8:
        _visible_cache.clear()
    _visible_cache[key] = (mask, visible)
    return visible


def _supported(query: torch.Tensor, key: torch.Tensor, kwargs: dict[str, Any]) -> bool:
    return (
        query.device.type == "cpu"
        and query.shape[0] == 1
        and query.shape[2] <= MAX_ROWS
        and key.dtype in small_gemm.TYPE_CODES
        and query.dtype == key.dtype
        and key.stride(-1) == 1
        and kwargs.get("softcap") is None
        and kwargs.get("s_aux") is None
        and kwargs.get("position_bias") is None
        and kernel_library.unavailable_reason() is None
    )


def row_attention(
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
    """Attention over query [1, H, T, D] and cached key/value [1, H_kv, L, D] -> [1, T, H, D]."""
    args = (module, query, key, value, attention_mask, dropout, scaling, is_causal)
    if not _supported(query, key, kwargs) or (module.training and dropout > 0):
        return attention.grouped_sdpa(*args, **kwargs)
    _, heads, rows, dim = query.shape
    kv_heads, length = key.shape[1], key.shape[2]
    if attention_mask is not None and attention_mask.shape[-1] < length:
        return attention.grouped_sdpa(*args, **kwargs)
    visible = visible_rows(attention_mask, rows, length)
    if visible is None and (attention_mask is not None or rows > 1):
        return attention.grouped_sdpa(*args, **kwargs)
    q = query[0].transpose(0, 1).float().contiguous()  # [T, H, D]
    v = value if value.stride(-1) == 1 else value.contiguous()
    out = torch.empty_like(q)
    scale = scaling if scaling is not None else dim**-0.5
    kernel_library.library().row_attention(
        q.data_ptr(), key.data_ptr(), v.data_ptr(), out.data_ptr(),
        visible.data_ptr() if visible is not None else None,
        rows, heads, kv_heads, length, dim, key.stride(1), key.stride(2),
        v.stride(1), v.stride(2), float(scale), small_gemm.TYPE_CODES[key.dtype],
    )  # fmt: skip
    return out.to(query.dtype)[None], None


def register() -> str:
    """Register the function (idempotent) and return its implementation name."""
    attention.register()
    AttentionInterface.register(NAME, row_attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    return NAME
