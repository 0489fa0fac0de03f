"""The layer stack's rotary table: every position's cos and sin read from the table are
bit for bit what computing that position alone gives, at each dtype, across the table's growth
and for every position of the grown table."""

from __future__ import annotations

import pytest
import torch

from racer_bench.engine.fast import kernel_library
from racer_bench.models.loaders import tiny_random

pytestmark = pytest.mark.skipif(
    kernel_library.unavailable_reason() is not None,
    reason=f"kernels unavailable: {kernel_library.unavailable_reason()}",
)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_table_rows_equal_positions_computed_alone(dtype) -> None:
    target = tiny_random(dtype=dtype, num_kv_heads=2)
    target.set_engine("fast")
    native = target.layer_stack
    assert native is not None
    steps = [torch.tensor([5]), torch.arange(1020, 1030), torch.tensor([3000, 2999, 7])]
    for positions in steps:  # the second and third steps grow the table
        cos, sin = native.cached_rotary(positions)
        for row, position in enumerate(positions.tolist()):
            alone_cos, alone_sin = native.rotary_tables(torch.tensor([position]))
            assert torch.equal(cos[row], alone_cos[0]), position
            assert torch.equal(sin[row], alone_sin[0]), position
    assert len(native._cos) >= 3001
    every = torch.arange(len(native._cos))
    cos, sin = native.cached_rotary(every)
    alone = [native.rotary_tables(torch.tensor([p])) for p in every.tolist()]
    assert torch.equal(cos, torch.cat([c for c, _ in alone]))
    assert torch.equal(sin, torch.cat([s for _, s in alone]))
