"""The preallocated cache layer: in-place appends, growth, crop and in-place compaction."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig

from racer_bench.engine import kv_cache


def states(length: int, start: int = 0) -> torch.Tensor:
    """[1, 2, length, 3] whose values encode their position."""
    pos = torch.arange(start, start + length, dtype=torch.float32)
    return pos[None, None, :, None].expand(1, 2, length, 3).clone()


def test_appends_grow_past_the_initial_capacity() -> None:
    layer = kv_cache.PreallocatedLayer()
    total = 0
    for length in (300, 1, 400, 7):
        keys, values = layer.update(states(length, total), states(length, total) * 2)
        total += length
        assert keys.shape == (1, 2, total, 3)
        assert torch.equal(keys[0, 0, :, 0], torch.arange(total, dtype=torch.float32))
        assert torch.equal(values, keys * 2)
    assert layer.get_seq_length() == total


def test_crop_and_keep_positions_match_dynamic_cache() -> None:
    config = LlamaConfig(num_hidden_layers=2)
    fast = kv_cache.new_cache(config, preallocated=True)
    slow = kv_cache.new_cache(config)
    for cache in (fast, slow):
        for layer in range(2):
            cache.update(states(10), states(10) + 100, layer)
        kv_cache.keep_positions(cache, 4, [0, 2, 5])
        kv_cache.drop_last(cache, 1)
        for layer in range(2):
            cache.update(states(2, 50), states(2, 150), layer)
    assert kv_cache.cache_length(fast) == kv_cache.cache_length(slow) == 8
    for a, b in zip(fast.layers, slow.layers, strict=True):
        assert torch.equal(a.keys, b.keys)
        assert torch.equal(a.values, b.values)
    assert fast.layers[0].keys[0, 0, :, 0].tolist() == [0, 1, 2, 3, 4, 6, 50, 51]


def test_keys_and_values_are_views_of_the_used_rows_made_when_read() -> None:
    layer = kv_cache.PreallocatedLayer()
    assert layer.keys is None and layer.values is None  # not initialised yet
    rows = states(3)
    layer.update(rows, rows * 2)
    kv_cache.reserve(layer, 5)  # the layer stack's way: the length moves, no view is made
    assert layer.keys.shape == (1, 2, 5, 3) and layer.keys.data_ptr() == layer._keys.data_ptr()
    layer.crop(-3)
    assert torch.equal(layer.keys, rows[..., :2, :]) and torch.equal(layer.values, layer.keys * 2)
    with pytest.raises(TypeError, match="views of its buffer"):
        layer.keys = rows
