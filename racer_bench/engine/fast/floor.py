"""The weight-read floor of a decode step: what reading the weights once costs on this machine.

A batch-1 AR step reads every weight the forward multiplies with (the embedding table only
through the LM head when they are tied) once, so it cannot take less than
``weight bytes / memory read bandwidth``. Every speedup divides by our own AR step, so the
summary reports that step as a multiple of the floor: a step far above it carries overhead
that spreads over a speculative step's tokens and flatters speculation.

The bandwidth is the best of several readers, each over a buffer larger than any cache with
the run's threads (best of a few passes): a float32 ``sum``, and where the kernels are built,
our own one-row products over a float32 and a bfloat16 weight (the AR step's own reader, with
its prefetching). A floor from ``sum`` alone sat up to 10% above what the bfloat16 product
reads on the AVX512-BF16 EPYC, so AR steps measured at 0.98x "the floor". It is measured in
every run (0.3-0.4 s of start-up on the EPYC), in the same sitting as the AR steps it is compared
with: the virtual machines we measure on drift 20-40% in speed between hours, and a bandwidth
cached once per machine put the same kernels at 0.86x and at 1.62x "the floor".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from racer_bench.engine.fast import kernel_library, small_gemm

BUFFER_BYTES = 256 << 20  # 8x a 32 MiB last-level cache (the products read half of it)
PASSES = 5


def measure_bandwidth(buffer_bytes: int = BUFFER_BYTES, passes: int = PASSES) -> dict[str, float]:
    """Memory read bandwidth in GB/s (1e9 bytes/s) per reader: the best of ``passes`` reads of
    ``buffer_bytes`` (a one-row product reads a weight of about half that)."""
    buffer = torch.ones(buffer_bytes // 4, dtype=torch.float32)
    readers = {"sum_float32": _best_gbps(buffer.sum, buffer_bytes, passes)}
    del buffer
    if kernel_library.unavailable_reason() is None:
        for dtype in (torch.float32, torch.bfloat16):
            name = f"gemv_{str(dtype).removeprefix('torch.')}"
            readers[name] = _gemv_gbps(dtype, buffer_bytes // 2, passes)
    return readers


def _gemv_gbps(dtype: torch.dtype, weight_bytes: int, passes: int) -> float:
    """One row times a packed weight of ``weight_bytes``: the AR step's way of reading."""
    k = 576  # a projection's width (SmolLM2's hidden size); a row of any width reads the same
    n = max(weight_bytes // (k * dtype.itemsize) // 16, 1) * 16  # whole 16-row panels
    weight = small_gemm.PackedWeight(torch.ones(n, k, dtype=dtype))
    row = torch.ones(1, k, dtype=dtype)
    return _best_gbps(lambda: weight(row), n * k * dtype.itemsize, passes)


def _best_gbps(read: Callable[[], object], nbytes: int, passes: int) -> float:
    best = float("inf")
    for _ in range(passes):
        start = time.perf_counter()
        read()
        best = min(best, time.perf_counter() - start)
    return nbytes / best / 1e9


def bandwidth() -> dict[str, Any]:
    """``{"gbps", "readers", "threads"}``: the read bandwidth of every reader now, with the
    current torch threads; ``gbps`` is the best reader's."""
    readers = measure_bandwidth()
    return {"gbps": max(readers.values()), "readers": readers, "threads": torch.get_num_threads()}


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of the parameters a batch-1 forward reads in full.

    Every parameter counts once (tied weights are one tensor), except the input embedding
    table, of which a step reads a row, unless it doubles as the LM head.
    """
    embedding = model.get_input_embeddings().weight
    head = model.get_output_embeddings()
    tied = head is not None and getattr(head, "weight", None) is embedding
    seen: dict[int, int] = {}
    for param in model.parameters():
        if param is embedding and not tied:
            continue
        seen[id(param)] = param.numel() * param.element_size()
    return sum(seen.values())


def floor_record(model: torch.nn.Module, bw: dict[str, Any] | None = None) -> dict[str, Any]:
    """The floor of an AR step on this machine: bandwidth, weight bytes and milliseconds
    (``bw``: a :func:`bandwidth` measured already, else measured now)."""
    bw = bw or bandwidth()
    size = weight_bytes(model)
    return {"bandwidth_gbps": bw["gbps"], "weight_bytes": size,
            "floor_ms": size / (bw["gbps"] * 1e9) * 1e3, "threads": bw["threads"],
            "readers_gbps": bw.get("readers")}  # fmt: skip
