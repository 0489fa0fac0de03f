"""The row-invariant attention kernel (``csrc/row_attention.c``) on its own, without a model.

It must compute softmax attention over each row's visible keys (against a float64 reference),
give a row the same bits whether it runs alone or beside other rows (row invariance), and the
same bits whatever the thread count (its work is split in items, not its chains).
"""

from __future__ import annotations

import ctypes
import itertools

import pytest
import torch

from racer_bench.engine.fast import kernel_library, small_gemm

pytestmark = pytest.mark.skipif(
    kernel_library.unavailable_reason() is not None,
    reason=f"kernels unavailable: {kernel_library.unavailable_reason()}",
)
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# (query heads, KV heads): 3 per KV head (SmolLM2), 5 (chunks of 4 + 1), 1 (multi-head)
HEADS = ((9, 3), (10, 2), (4, 4))


def attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, visible: torch.Tensor | None
) -> torch.Tensor:
    """The kernel over q [T, H, D] (float32), k, v [H_kv, L, D] and visible uint8 [T, L]."""
    t, heads, dim = q.shape
    kv_heads, length = k.shape[0], k.shape[1]
    out = torch.full_like(q, float("nan"))
    kernel_library.library().row_attention(
        q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
        visible.data_ptr() if visible is not None else None,
        t, heads, kv_heads, length, dim, k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        ctypes.c_float(dim**-0.5), small_gemm.TYPE_CODES[k.dtype],
    )  # fmt: skip
    return out


def reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, visible: torch.Tensor | None
) -> torch.Tensor:
    """float64 softmax attention of each row over its visible keys: [T, H, D]."""
    heads, dim = q.shape[1:]
    group = heads // k.shape[0]
    keys = k.double().repeat_interleave(group, dim=0)  # [H, L, D]
    values = v.double().repeat_interleave(group, dim=0)
    scores = torch.einsum("thd,hld->thl", q.double(), keys) * dim**-0.5
    if visible is not None:
        scores = scores.masked_fill(visible[:, None, :] == 0, float("-inf"))
    return torch.einsum("thl,hld->thd", scores.softmax(-1), values)


def tree_visible(gen: torch.Generator, t: int, length: int) -> torch.Tensor:
    """uint8 [T, L]: the whole prefix, then a random subset of earlier step keys and oneself."""
    past = length - t
    visible = torch.zeros(t, length, dtype=torch.uint8)
    visible[:, :past] = 1
    for row in range(t):
        visible[row, past : past + row] = torch.rand(row, generator=gen) < 0.5
        visible[row, past + row] = 1
    return visible


def inputs(dtype: torch.dtype, t: int, heads: tuple[int, int], dim: int, length: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    kv_heads = heads[1]
    q = torch.randn(t, heads[0], dim, generator=gen)
    k = torch.randn(kv_heads, length + 3, dim, generator=gen).to(dtype)[:, :length]  # strided
    v = torch.randn(kv_heads, length, dim, generator=gen).to(dtype)
    visible = tree_visible(gen, t, length) if t > 1 else None
    return q, k, v, visible


CASES = list(itertools.product(DTYPES, (1, 3, 17), HEADS, (64, 12, 80), (17, 300)))


@pytest.mark.parametrize(("dtype", "t", "heads", "dim", "length"), CASES)
def test_matches_a_float64_softmax_over_the_visible_keys(dtype, t, heads, dim, length) -> None:
    q, k, v, visible = inputs(dtype, t, heads, dim, length, seed=t + dim + length)
    got = attend(q, k, v, visible)
    assert torch.allclose(got.double(), reference(q, k, v, visible), atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize(
    ("dtype", "heads", "dim", "t"), itertools.product(DTYPES, HEADS, (64, 12, 80), (9, 2, 33))
)  # 2-33 rows: key blocks shared by the rows in turn; one row alone
def test_a_row_alone_gets_the_bits_it_gets_beside_other_rows(dtype, heads, dim, t) -> None:
    q, k, v, visible = inputs(dtype, t, heads, dim, 200, seed=7)
    together = attend(q, k, v, visible)
    for row in range(q.shape[0]):
        alone = attend(q[row : row + 1].contiguous(), k, v, visible[row : row + 1].contiguous())
        assert torch.equal(alone[0].view(torch.int32), together[row].view(torch.int32)), row


@pytest.mark.parametrize("t", [1, 16])
def test_the_thread_count_changes_no_bit(t) -> None:
    q, k, v, visible = inputs(torch.bfloat16, t, (9, 3), 64, 600, seed=3)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = attend(q, k, v, visible)
        torch.set_num_threads(2)
        two = attend(q, k, v, visible)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one.view(torch.int32), two.view(torch.int32))
