"""The weight-read floor of a decode step: what reading the weights once costs on this machine.

A batch-1 AR step reads every weight the forward multiplies with (the embedding table only
through the LM head when they are tied) once, so it cannot take less than
``weight bytes / memory read bandwidth``. Every speedup divides by our own AR step, so the
summary reports that step as a multiple of the floor: a step far above it carries overhead
that spreads over a speculative step's tokens and flatters speculation.

The bandwidth is the best of several readers, each over a buffer larger than any cache with
the run's threads (best of a few passes): a float32 ``sum``, and where the kernels are built,
our own one-row products over a float32 and a bfloat16 weight (the AR step's own reader, with
its prefetching). A floor from ``sum`` alone sat about 10% above what the bfloat16 product
reads on the AVX512-BF16 EPYC, so AR steps measured at 0.98x "the floor". The readers' figures
are cached per hardware id and thread count under ``<cache_dir>/floor/``, so a run measures
them once per machine.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from racer_bench.engine import kernel_library, small_gemm
from racer_bench.system import files, hardware

FLOOR_DIR = "floor"
# in the cache file's name: a machine measured with the sum alone measures again
READERS = "readers2"
BUFFER_BYTES = 512 << 20  # well past a 32 MiB last-level cache
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
    k = 576
    n = max(weight_bytes // (k * torch.finfo(dtype).bits // 8) // 16, 1) * 16
    weight = small_gemm.PackedWeight(torch.ones(n, k, dtype=dtype))
    row = torch.ones(1, k, dtype=dtype)
    return _best_gbps(lambda: weight(row), n * k * row.element_size(), passes)


def _best_gbps(read: Callable[[], object], nbytes: int, passes: int) -> float:
    best = float("inf")
    for _ in range(passes):
        start = time.perf_counter()
        read()
        best = min(best, time.perf_counter() - start)
    return nbytes / best / 1e9


def bandwidth(cache_dir: Path | str) -> dict[str, Any]:
    """``{"gbps", "readers", "threads", "cached"}`` for this machine and thread count (measured
    once): ``gbps`` is the best reader's."""
    threads = torch.get_num_threads()
    fp = hardware.fingerprint(threads)
    path = Path(cache_dir).expanduser() / FLOOR_DIR / f"{fp['id']}-t{threads}-{READERS}.json"
    try:
        return {**json.loads(path.read_text(encoding="utf-8")), "cached": True}
    except (OSError, ValueError):
        pass
    readers = measure_bandwidth()
    record = {"gbps": max(readers.values()), "readers": readers, "threads": threads}
    files.write_text(path, json.dumps(record))
    return {**record, "cached": False}


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


def floor_record(model: torch.nn.Module, cache_dir: Path | str) -> dict[str, Any]:
    """The floor of an AR step on this machine: bandwidth, weight bytes and milliseconds."""
    bw = bandwidth(cache_dir)
    size = weight_bytes(model)
    return {"bandwidth_gbps": bw["gbps"], "weight_bytes": size,
            "floor_ms": size / (bw["gbps"] * 1e9) * 1e3, "threads": bw["threads"],
            "readers_gbps": bw.get("readers")}  # fmt: skip
