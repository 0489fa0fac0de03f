"""The only module that touches past key/values.

Layout assumed: a transformers ``Cache`` whose layers hold ``keys``/``values`` tensors of shape
``[batch, kv_heads, seq, head_dim]`` (``DynamicCache`` in transformers 5.x).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import DynamicCache


def new_cache(config: object) -> DynamicCache:
    """An empty cache shaped for ``config`` (sliding-window layers included)."""
    return DynamicCache(config=config)


def cache_length(cache: DynamicCache) -> int:
    """Number of cached positions."""
    return cache.get_seq_length()


def keep_positions(cache: DynamicCache, start: int, keep: Sequence[int]) -> None:
    """Keep cached rows ``start + keep[j]`` at ``start + j`` and drop every row after them.

    Used after a tree forward: ``start`` is the committed prefix length, ``keep`` the tree
    positions of the root and the accepted path (ascending, ``keep[0] == 0``). A chain's path is
    contiguous, so it is a crop; a tree path is gathered into place first (the index gather makes
    a copy, so the overlapping write is safe).
    """
    total = cache_length(cache)
    new_len = start + len(keep)
    contiguous = all(k == j for j, k in enumerate(keep))
    if not contiguous:
        index = torch.tensor(keep, dtype=torch.long) + start
        for layer in cache.layers:
            if not getattr(layer, "is_initialized", True) or layer.keys is None:
                continue
            index = index.to(layer.keys.device)
            layer.keys[..., start:new_len, :] = layer.keys.index_select(-2, index)
            layer.values[..., start:new_len, :] = layer.values.index_select(-2, index)
    drop_last(cache, total - new_len)


def drop_last(cache: DynamicCache, n: int) -> None:
    """Drop the last ``n`` cached positions (no-op for ``n <= 0``)."""
    if n > 0:
        for layer in cache.layers:
            layer.crop(-n)
