"""Which bfloat16 x bfloat16 GEMM the fast engine uses on this CPU: AMX tiles, AVX512-BF16
pair dot products, or bfloat16 widened to float32 FMAs (AVX2 machines).

Each is row-invariant; they round differently, so a model runs every step on one of them. The
AMX kernel is used only after a child process has checked this build on this machine
(:mod:`racer_bench.engine.fast.amx_probe`), since a refused tile state or a wrong instruction ends
the
process that runs it. ``$RACER_BENCH_BF16_GEMM`` forces one the CPU can run.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence

import torch

from racer_bench.engine.fast.kernel_library import kernel_dir, library, source_digest
from racer_bench.system import files, hardware

BF16_ENV = "RACER_BENCH_BF16_GEMM"  # force the bfloat16 kernel: amx | pairs | widen
BF16_KERNELS = ("amx", "pairs", "widen")  # in order of preference
KERNEL_CODES = {None: 0, "pairs": 1, "amx": 2}  # PackedWeight.kernel -> decoder_layer's `pairs`
AMX_K = 32  # the AMX kernel needs K a multiple of this (16 pairs per tile row)


def bf16_kernel() -> str:
    """The bfloat16 GEMM: ``amx`` (AMX tiles) where the CPU has them and they pass
    :func:`amx_unusable`'s check, else ``pairs`` (AVX512-BF16 dot products) where the CPU has
    them, else ``widen`` (bfloat16 widened to float32 FMAs); ``$RACER_BENCH_BF16_GEMM`` forces one
    the CPU can run."""
    forced = os.environ.get(BF16_ENV)
    if forced is not None:
        if forced not in BF16_KERNELS:
            raise ValueError(f"{BF16_ENV}={forced}: expected one of {', '.join(BF16_KERNELS)}")
        why = unable(forced)
        if why:
            raise ValueError(f"{BF16_ENV}={forced}: {why}")
        return forced
    return next(name for name in BF16_KERNELS if unable(name) is None)


def unable(kernel: str) -> str | None:
    """Why this CPU cannot run a bfloat16 kernel (None when it can)."""
    if kernel == "amx":
        return amx_unusable()
    if kernel == "pairs" and not library().small_gemm_has_avx512bf16():
        return "this CPU has no AVX512-BF16"
    return None


@functools.cache
def amx_unusable() -> str | None:
    """None when the AMX kernel may run in this process, else why not. The kernel is checked
    once per build in a child process (:mod:`racer_bench.engine.fast.amx_probe`: values, row
    invariance, no crash), the verdict cached beside the build, before any model uses it."""
    lib = library()
    if not lib.small_gemm_has_amx():
        return "this CPU has no AMX-BF16 tiles"
    verdict = amx_verdict()
    if verdict is not None:
        return verdict
    if lib.small_gemm_amx_enable() != 0:
        return "Linux refused this process the AMX tile state (arch_prctl)"
    return None


PROBE = (sys.executable, "-m", "racer_bench.engine.fast.amx_probe")


def amx_verdict(command: Sequence[str] = PROBE, timeout_s: float = 120.0) -> str | None:
    """The child-process check of this build's AMX kernel (``command``), cached per machine and
    build: None (passed) or why not."""
    machine = hardware.fingerprint(1)["id"]  # a cache folder may be shared by several machines
    path = kernel_dir() / f"amx-probe-{machine}-{source_digest()}.json"
    if path.exists():
        return json.loads(path.read_text())["unusable"]
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=timeout_s)
        lines = (done.stdout.strip() or done.stderr.strip() or "no verdict").splitlines()
        if done.returncode < 0:
            why = f"the AMX check crashed ({signal.Signals(-done.returncode).name})"
        else:
            why = None if done.returncode == 0 and lines[-1] == "ok" else lines[-1]
    except subprocess.TimeoutExpired:
        why = f"the AMX check took over {timeout_s:.0f} s"
    files.write_text(path, json.dumps({"unusable": why}) + "\n")
    return why


def pair_kernel(weight: torch.Tensor) -> str | None:
    """The kernel of bfloat16 x bfloat16 products a weight [N, K] takes: ``amx`` (K a multiple
    of 32), ``pairs`` (K even), or None (the widening kernel)."""
    if weight.dtype != torch.bfloat16 or weight.shape[1] % 2:
        return None
    kernel = bf16_kernel()
    if kernel == "amx":
        return "amx" if weight.shape[1] % AMX_K == 0 else "pairs"
    return "pairs" if kernel == "pairs" else None
