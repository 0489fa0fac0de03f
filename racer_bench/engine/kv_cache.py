"""The only module that touches past key/values.

Layout assumed: a transformers ``Cache`` whose layers hold ``keys``/``values`` tensors of shape
``[batch, kv_heads, seq, head_dim]``. Two kinds:

* ``new_cache(config)``: transformers' ``DynamicCache`` (the ``eager`` engine): every forward
  concatenates, sliding-window layers keep only their window.
* ``new_cache(config, preallocated=True)``: :class:`PreallocatedLayer` for every layer (the
  ``fast`` engine): keys and values are written in place into a buffer that grows by doubling,
  ``keys``/``values`` are views of its used rows, and compaction after a tree step moves the
  accepted rows in place. Every layer keeps every position, sliding-window layers included:
  the target's masks (``target.py``) give those layers their window.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import Cache, DynamicCache
from transformers.cache_utils import DynamicLayer

MIN_CAPACITY = 512


class UsedRows:
    """A layer attribute that reads as a view of the used rows ``[..., :length, :]`` of the
    buffer named ``buffer`` (None before the layer is initialised), made when read."""

    def __init__(self, buffer: str) -> None:
        self.buffer = buffer

    def __get__(self, layer: Any, owner: type | None = None) -> torch.Tensor | None:
        if layer is None or not getattr(layer, "is_initialized", False):
            return None
        return getattr(layer, self.buffer)[..., : layer.length, :]

    def __set__(self, layer: Any, value: torch.Tensor | None) -> None:
        # transformers' layer constructor clears keys / values; nothing else may set them
        # (beam search's reorderings and offloading are not supported)
        if value is not None:
            raise TypeError("a PreallocatedLayer's keys and values are views of its buffer")


class PreallocatedLayer(DynamicLayer):
    """One layer's keys/values in a preallocated buffer FloatTensor[B, H_kv, capacity, D].

    ``keys`` / ``values`` are views of the used rows, made when read: the layer stack moves
    ``length`` twice a step in every layer (reserve, then compaction) and reads neither, and
    four view objects per layer per step were a few percent of an AR step.
    """

    keys = UsedRows("_keys")
    values = UsedRows("_values")

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        self.length = 0
        self._keys = key_states.new_empty(_buffer_shape(key_states, MIN_CAPACITY))
        self._values = value_states.new_empty(_buffer_shape(value_states, MIN_CAPACITY))
        self.is_initialized = True

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append ``[B, H_kv, T, D]`` states; return views of all cached rows."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.length + key_states.shape[-2]
        if end > self._keys.shape[-2]:
            self._grow(end)
        self._keys[..., self.length : end, :].copy_(key_states)
        self._values[..., self.length : end, :].copy_(value_states)
        self.length = end
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length if self.is_initialized else 0

    def crop(self, tokens_to_remove: int) -> None:
        """Drop the last ``-tokens_to_remove`` rows (a negative count, as transformers does)."""
        if tokens_to_remove > 0:
            raise ValueError(f"crop takes a negative count, got {tokens_to_remove}")
        if self.is_initialized and tokens_to_remove:
            self.length = max(self.length + tokens_to_remove, 0)

    def reset(self) -> None:
        if self.is_initialized:
            self.length = 0

    def _grow(self, needed: int) -> None:
        capacity = self._keys.shape[-2]
        while capacity < needed:
            capacity *= 2
        for name in ("_keys", "_values"):
            old = getattr(self, name)
            new = old.new_empty(_buffer_shape(old, capacity))
            new[..., : self.length, :].copy_(old[..., : self.length, :])
            setattr(self, name, new)


def reserve(layer: Any, end: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Grow ``layer`` (an initialised :class:`PreallocatedLayer`) to ``end`` positions and
    return its whole key and value buffers [B, H_kv, capacity, D], for a kernel that writes the
    new rows itself (:mod:`racer_bench.engine.fast.llama`)."""
    if not isinstance(layer, PreallocatedLayer) or not layer.is_initialized:
        raise TypeError("reserve needs an initialised PreallocatedLayer (prefill first)")
    if end > layer._keys.shape[-2]:
        layer._grow(end)
    layer.length = end
    return layer._keys, layer._values


def _buffer_shape(states: torch.Tensor, capacity: int) -> tuple[int, ...]:
    return (*states.shape[:-2], capacity, states.shape[-1])


def new_cache(config: Any, preallocated: bool = False) -> Cache:
    """An empty cache shaped for ``config``."""
    if not preallocated:
        return DynamicCache(config=config)
    n_layers = config.get_text_config(decoder=True).num_hidden_layers
    return Cache(layers=[PreallocatedLayer() for _ in range(n_layers)])


def cache_length(cache: Cache) -> int:
    """Number of cached positions."""
    return cache.get_seq_length()


def keep_positions(cache: Cache, start: int, keep: Sequence[int]) -> None:
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
            # read once: a PreallocatedLayer makes a new view at every read
            keys, values = layer.keys, layer.values
            if not getattr(layer, "is_initialized", True) or keys is None:
                continue
            index = index.to(keys.device)
            keys[..., start:new_len, :] = keys.index_select(-2, index)
            values[..., start:new_len, :] = values.index_select(-2, index)
    drop_last(cache, total - new_len)


def drop_last(cache: Cache, n: int) -> None:
    """Drop the last ``n`` cached positions (no-op for ``n <= 0``)."""
    if n > 0:
        for layer in cache.layers:
            layer.crop(-n)
