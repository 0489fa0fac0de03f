"""The packed small-M GEMM against F.linear: values, batch invariance, tails, fallbacks."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from racer_bench.engine.fast import kernel_library, small_gemm

pytestmark = pytest.mark.skipif(
    kernel_library.unavailable_reason() is not None,
    reason=f"small GEMM kernel unavailable: {kernel_library.unavailable_reason()}",
)


@pytest.mark.parametrize("m", [1, 2, 5, 6, 7, 13, 40])
@pytest.mark.parametrize(("n", "k"), [(16, 8), (37, 19), (192, 576), (5, 3)])
def test_matches_f_linear(m: int, n: int, k: int) -> None:
    gen = torch.Generator().manual_seed(m * 1000 + n + k)
    w = torch.randn(n, k, generator=gen)
    x = torch.randn(m, k, generator=gen)
    got = small_gemm.matmul(x, small_gemm.pack(w), n)
    exact = x.double() @ w.double().T  # float32 rounding grows with k; layout bugs are O(1)
    torch.testing.assert_close(got.double(), exact, rtol=0, atol=1e-6 * k)


def test_rows_do_not_depend_on_the_other_rows() -> None:
    """Batch invariance: a row alone and inside 1..20-row products gives identical bits."""
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(100, 64, generator=gen)
    packed = small_gemm.pack(w)
    x = torch.randn(20, 64, generator=gen)
    alone = torch.stack([small_gemm.matmul(x[i : i + 1], packed, 100)[0] for i in range(20)])
    for m in (2, 6, 7, 12, 20):
        assert torch.equal(small_gemm.matmul(x[:m], packed, 100), alone[:m])


def test_thread_count_does_not_change_results() -> None:
    gen = torch.Generator().manual_seed(1)
    w, x = torch.randn(200, 48, generator=gen), torch.randn(9, 48, generator=gen)
    packed = small_gemm.pack(w)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = small_gemm.matmul(x, packed, 200)
        torch.set_num_threads(2)
        two = small_gemm.matmul(x, packed, 200)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one, two)


def test_packed_linear_keeps_parameters_and_falls_back() -> None:
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(12, 20), nn.ReLU(), nn.Linear(20, 7, bias=False))
    reference = [m.weight for m in model if isinstance(m, nn.Linear)]
    x = torch.randn(3, 5, 12)
    expected = model(x)
    assert small_gemm.pack_linears(model) == 2
    assert [m.weight for m in model if hasattr(m, "weight")] == reference  # same Parameters
    assert isinstance(model[0], small_gemm.PackedLinear)
    with torch.inference_mode():
        torch.testing.assert_close(model(x), expected, rtol=1e-5, atol=1e-5)
    expected.sum().backward()  # gradients flow through the F.linear fallback
    model(x).sum().backward()
    assert model[0].weight.grad is not None


def test_float64_linears_are_not_replaced() -> None:
    model = nn.Linear(4, 4).double()
    wrapper = nn.Sequential(model)
    assert small_gemm.pack_linears(wrapper) == 0
    assert wrapper[0] is model


@pytest.mark.parametrize("engine", ["auto", "fast", "eager"])
def test_draft_heads_use_the_kernel_unless_the_engine_is_eager(engine: str) -> None:
    from methods.common.heads.layers import for_inference
    from methods.medusa.head import MedusaHeads

    torch.manual_seed(0)
    heads = MedusaHeads(32, 2, 1, torch.arange(50))
    x = torch.randn(3, 32)
    with torch.no_grad():
        before = heads(x)
    ready = for_inference(heads, engine)
    packed = [m for m in ready.modules() if isinstance(m, small_gemm.PackedLinear)]
    assert bool(packed) == (engine != "eager")
    assert not any(p.requires_grad for p in ready.parameters()) and not ready.training
    torch.testing.assert_close(ready(x), before, rtol=1e-5, atol=1e-5)  # grad mode on: kernel


def test_the_panel_schedule_is_a_build_flag_checked_by_name(monkeypatch) -> None:
    monkeypatch.delenv(kernel_library.SCHEDULE_ENV, raising=False)
    assert "-DPANEL_SCHEDULE=static" in kernel_library.build_flags()
    monkeypatch.setenv(kernel_library.SCHEDULE_ENV, "dynamic")
    assert "-DPANEL_SCHEDULE=dynamic" in kernel_library.build_flags()
    monkeypatch.setenv(kernel_library.SCHEDULE_ENV, "fastest")
    with pytest.raises(ValueError, match="RACER_BENCH_GEMM_SCHEDULE=fastest: expected one of"):
        kernel_library.build_flags()


@pytest.mark.parametrize("schedule", ["static", "dynamic"])
def test_every_schedule_builds_and_gives_the_same_bits(schedule: str, tmp_path) -> None:
    """Both builds of the source, loaded side by side, agree bit for bit on a tree-sized product."""
    import ctypes
    import shutil

    compiler = shutil.which("cc") or shutil.which("gcc")
    out = tmp_path / f"gemm_{schedule}.so"
    flags = (*kernel_library.FLAGS, f"-DPANEL_SCHEDULE={schedule}")
    assert kernel_library.compile_library(compiler, flags, out) is None
    lib = ctypes.CDLL(str(out))
    gen = torch.Generator().manual_seed(2)
    w, x = torch.randn(200, 64, generator=gen), torch.randn(12, 64, generator=gen)
    packed = small_gemm.pack(w)
    y = torch.empty(12, 200)
    lib.small_gemm.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_long] * 3
    lib.small_gemm(x.data_ptr(), packed.data_ptr(), y.data_ptr(), 12, 200, 64)
    assert torch.equal(y, small_gemm.matmul(x, packed, 200))


HAS_PAIRS = kernel_library.unavailable_reason() is None and bool(
    kernel_library.library().small_gemm_has_avx512bf16()
)
needs_pairs = pytest.mark.skipif(
    not HAS_PAIRS,
    reason="the pairs kernel needs AVX512-BF16",
)


@needs_pairs
@pytest.mark.parametrize("m", [1, 5, 8, 9, 16, 17, 40])
@pytest.mark.parametrize(("n", "k"), [(16, 8), (37, 20), (200, 96)])
def test_pairs_kernel_matches_a_float64_product(m: int, n: int, k: int) -> None:
    """Every block shape (1-8 rows, 1-8 panels, tails) computes x @ W.T of the bfloat16 inputs."""
    gen = torch.Generator().manual_seed(m * 1000 + n + k)
    w = torch.randn(n, k, generator=gen).bfloat16()
    x = torch.randn(m, k, generator=gen).bfloat16()
    got = small_gemm.matmul_pairs(x, small_gemm.pack_pairs(w), n)
    exact = x.double() @ w.double().T
    torch.testing.assert_close(got.double(), exact, rtol=0, atol=1e-6 * k)


@needs_pairs
def test_pairs_rows_do_not_depend_on_the_other_rows() -> None:
    """A row alone and inside 2..40-row products (every split into blocks of up to 8 rows, a
    prefetching block among them) gives identical bits."""
    gen = torch.Generator().manual_seed(3)
    w = torch.randn(300, 64, generator=gen).bfloat16()
    packed = small_gemm.pack_pairs(w)
    x = torch.randn(40, 64, generator=gen).bfloat16()
    alone = torch.stack([small_gemm.matmul_pairs(x[i : i + 1], packed, 300)[0] for i in range(40)])
    for m in (2, 7, 8, 9, 12, 16, 17, 33, 40):
        assert torch.equal(small_gemm.matmul_pairs(x[:m], packed, 300), alone[:m])
