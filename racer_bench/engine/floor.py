"""The weight-read floor of a decode step: what reading the weights once costs on this machine.

A batch-1 AR step reads every weight the forward multiplies with (the embedding table only
through the LM head when they are tied) once, so it cannot take less than
``weight bytes / memory read bandwidth``. Every speedup divides by our own AR step, so the
summary reports that step as a multiple of the floor: a step far above it carries overhead
that spreads over a speculative step's tokens and flatters speculation.

The bandwidth is measured by summing a float32 buffer larger than any cache with the run's
threads (best of a few passes); it is cached per hardware id and thread count under
``<cache_dir>/floor/``, so a run measures it once per machine.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch

from racer_bench.system import files, hardware

FLOOR_DIR = "floor"
BUFFER_BYTES = 512 << 20  # well past a 32 MiB last-level cache
PASSES = 5


def measure_bandwidth(buffer_bytes: int = BUFFER_BYTES, passes: int = PASSES) -> float:
    """Memory read bandwidth in GB/s (1e9 bytes/s): the best of ``passes`` sums of a buffer."""
    buffer = torch.ones(buffer_bytes // 4, dtype=torch.float32)
    best = float("inf")
    for _ in range(passes):
        start = time.perf_counter()
        buffer.sum()
        best = min(best, time.perf_counter() - start)
    return buffer_bytes / best / 1e9


def bandwidth(cache_dir: Path | str) -> dict[str, Any]:
    """``{"gbps", "threads", "cached"}`` for this machine and thread count (measured once)."""
    threads = torch.get_num_threads()
    fp = hardware.fingerprint(threads)
    path = Path(cache_dir).expanduser() / FLOOR_DIR / f"{fp['id']}-t{threads}.json"
    try:
        return {**json.loads(path.read_text(encoding="utf-8")), "cached": True}
    except (OSError, ValueError):
        pass
    record = {"gbps": measure_bandwidth(), "threads": threads}
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
            "floor_ms": size / (bw["gbps"] * 1e9) * 1e3, "threads": bw["threads"]}  # fmt: skip
