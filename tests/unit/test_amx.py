"""The AMX kernel's selection: used only where the CPU has tiles and a child process has
checked the build; elsewhere the reason is one line and the pairs or widening kernel runs."""

from __future__ import annotations

import sys

import pytest
import torch

from racer_bench.engine.fast import amx_probe, bf16_gemm, kernel_library

pytestmark = pytest.mark.skipif(
    kernel_library.unavailable_reason() is not None,
    reason=f"small GEMM kernel unavailable: {kernel_library.unavailable_reason()}",
)
HAS_AMX = kernel_library.unavailable_reason() is None and bool(
    kernel_library.library().small_gemm_has_amx()
)


@pytest.mark.skipif(HAS_AMX, reason="this CPU has AMX")
def test_without_tiles_amx_is_refused_in_one_line(monkeypatch) -> None:
    assert bf16_gemm.unable("amx") == "this CPU has no AMX-BF16 tiles"
    assert amx_probe.check() == "this CPU has no AMX-BF16 tiles"
    monkeypatch.setenv(bf16_gemm.BF16_ENV, "amx")
    with pytest.raises(ValueError, match="RACER_BENCH_BF16_GEMM=amx: this CPU has no AMX"):
        bf16_gemm.bf16_kernel()
    monkeypatch.delenv(bf16_gemm.BF16_ENV)
    assert bf16_gemm.bf16_kernel() in ("pairs", "widen")


@pytest.mark.skipif(not HAS_AMX, reason="needs AMX-BF16 tiles")
def test_the_amx_kernel_passes_its_own_check() -> None:
    """Values against float64 and rows alone against rows in blocks, bit for bit."""
    assert amx_probe.check() is None


@pytest.mark.parametrize(
    ("script", "verdict"),
    [("print('ok')", None), ("print('AMX rows depend on the other rows')", "AMX rows depend on"),
     ("import os, signal; os.kill(os.getpid(), signal.SIGILL)", "the AMX check crashed (SIGILL)"),
     ("raise SystemExit('tile state refused')", "tile state refused")],
)  # fmt: skip
def test_the_child_check_gives_a_verdict_and_caches_it(script, verdict, tmp_path, monkeypatch):
    monkeypatch.setenv("RACER_BENCH_CACHE", str(tmp_path))
    command = (sys.executable, "-c", script)
    got = bf16_gemm.amx_verdict(command)
    assert got == verdict if verdict is None else got.startswith(verdict)
    [cached] = (tmp_path / "kernels").glob("amx-probe-*.json")
    assert bf16_gemm.amx_verdict((sys.executable, "-c", "print('not run')")) == got
    cached.unlink()


def test_amx_takes_weights_whose_k_fills_its_tiles(monkeypatch) -> None:
    monkeypatch.setattr(bf16_gemm, "bf16_kernel", lambda: "amx")
    assert bf16_gemm.pair_kernel(torch.zeros(16, 64, dtype=torch.bfloat16)) == "amx"
    assert bf16_gemm.pair_kernel(torch.zeros(16, 48, dtype=torch.bfloat16)) == "pairs"
    assert bf16_gemm.pair_kernel(torch.zeros(16, 64)) is None
    monkeypatch.setattr(bf16_gemm, "bf16_kernel", lambda: "widen")
    assert bf16_gemm.pair_kernel(torch.zeros(16, 64, dtype=torch.bfloat16)) is None
