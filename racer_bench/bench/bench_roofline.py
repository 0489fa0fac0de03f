"""Each kernel of a fast-engine step against its two roofs (``scripts/bench_roofline.py``): the
time to read what it reads (weights, or the KV cache) at the measured bandwidth, and the time
to do its multiply-adds at the measured peak rate.

Per (context, tokens in the step) the phase profile (:mod:`.profile_layer_phases`) gives the
microseconds of each GEMM and of row attention summed over the layers; the LM head is timed on
its own. Each gets

- ``x floor``: its time over the read floor (its bytes / the best read bandwidth of
  :func:`racer_bench.engine.fast.floor.measure_bandwidth`); 1.0 is memory-bound at the roof;
- ``% peak``: its multiply-adds per second over the machine's measured peak (:func:`peaks`:
  the best of our own GEMM kernel and torch's on operands that stay in cache).

A kernel near 100% of peak cannot get faster on that CPU however it reads memory; one near
1.0x its floor cannot get faster however it computes. Which roof binds moves with the rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from racer_bench.bench.profile_layer_phases import Shares
from racer_bench.engine.fast import small_gemm

GEMM_PHASES = ("q/k/v GEMM", "o GEMM", "gate/up GEMM", "down GEMM")
ATTENTION = "row attention"
LM_HEAD = "LM head"
IN_CACHE = (512, 576)  # (N, K) of a weight that stays in L2 (0.6 MB in bfloat16)


@dataclass(frozen=True)
class Shape:
    """The shapes a step's work follows: per-layer GEMM weights (N, K), attention, LM head."""

    gemms: dict[str, tuple[int, int]]
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    lm_head: tuple[int, int]
    itemsize: int

    @classmethod
    def of(cls, model: Any) -> Shape:
        c = model.config
        hidden, head_dim = c.hidden_size, c.hidden_size // c.num_attention_heads
        kv = c.num_key_value_heads * head_dim
        gemms = {"q/k/v GEMM": (hidden + 2 * kv, hidden), "o GEMM": (hidden, hidden),
                 "gate/up GEMM": (2 * c.intermediate_size, hidden),
                 "down GEMM": (hidden, c.intermediate_size)}  # fmt: skip
        itemsize = next(model.parameters()).dtype.itemsize
        return cls(gemms, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads,
                   head_dim, (c.vocab_size, hidden), itemsize)  # fmt: skip

    def work(self, kernel: str, rows: int, context: int) -> tuple[float, float]:
        """(bytes read, multiply-adds) of one step's ``kernel`` over all layers."""
        if kernel == LM_HEAD:
            n, k = self.lm_head
            return n * k * self.itemsize, rows * n * k
        if kernel == ATTENTION:  # keys and values of every position, every row against them
            kv_bytes = 2 * context * self.kv_heads * self.head_dim * self.itemsize
            macs = 2 * rows * self.heads * context * self.head_dim
            return kv_bytes * self.layers, macs * self.layers
        n, k = self.gemms[kernel]
        return n * k * self.itemsize * self.layers, rows * n * k * self.layers


def best_seconds(call: Callable[[], object], passes: int) -> float:
    best = float("inf")
    for _ in range(passes):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def peaks(dtype: torch.dtype, rows: int = 64, passes: int = 30) -> dict[str, float]:
    """Multiply-adds per second on operands that stay in cache: our packed GEMM at ``rows`` rows
    and torch's ``mm`` (oneDNN / MKL) at the same shape, and fp32 ``mm`` (attention's roof)."""
    n, k = IN_CACHE
    weight = torch.randn(n, k).to(dtype)
    x = torch.randn(rows, k).to(dtype)
    packed = small_gemm.PackedWeight(weight)
    macs = rows * n * k
    out = {"ours": macs / best_seconds(lambda: packed(x), passes),
           "torch_mm": macs / best_seconds(lambda: x @ weight.T, passes)}  # fmt: skip
    w32, x32 = weight.float(), x.float()
    out["torch_mm_float32"] = macs / best_seconds(lambda: x32 @ w32.T, passes)
    return out


def lm_head_us(target: Any, rows: int, reps: int) -> float:
    """Microseconds of the target's LM head over ``rows`` hidden rows (best of ``reps``)."""
    head = target.model.get_output_embeddings()
    x = torch.randn(1, rows, head.in_features).to(next(head.parameters()).dtype)
    with torch.inference_mode():
        head(x)
        return best_seconds(lambda: head(x), reps) * 1e6


@dataclass(frozen=True)
class Cell:
    kernel: str
    context: int
    rows: int
    us: float
    x_floor: float
    peak_share: float


def cells(
    phases: dict[tuple[int, int], Shares],
    heads_us: dict[int, float],
    shape: Shape,
    gbps: float,
    peak: dict[str, float],
) -> list[Cell]:
    """Every kernel of every (context, rows) against its roofs (``gbps``: the read bandwidth)."""
    gemm_peak = max(peak["ours"], peak["torch_mm"])
    out = []
    for (context, rows), shares in sorted(phases.items()):
        timed = {k: shares[k] for k in (*GEMM_PHASES, ATTENTION)} | {LM_HEAD: heads_us[rows]}
        for kernel, us in timed.items():
            nbytes, macs = shape.work(kernel, rows, context)
            roof = peak["torch_mm_float32"] if kernel == ATTENTION else gemm_peak
            out.append(Cell(kernel, context, rows, us, us * 1e-6 / (nbytes / (gbps * 1e9)),
                            macs / (us * 1e-6) / roof))  # fmt: skip
    return out


def table(found: list[Cell]) -> str:
    """Markdown: a row per (kernel, context), a column per row count: µs, x floor, % peak."""
    rows = sorted({c.rows for c in found})
    lines = ["| kernel | context | " + " | ".join(f"{r} tok" for r in rows) + " |",
             "|---|---:|" + "---:|" * len(rows)]  # fmt: skip
    keys = sorted({(c.kernel, c.context) for c in found}, key=lambda k: (_order(k[0]), k[1]))
    by = {(c.kernel, c.context, c.rows): c for c in found}
    for kernel, context in keys:
        if kernel != ATTENTION and context != min(c.context for c in found):
            continue  # a GEMM does not depend on the context: one line
        line = [f"{by[kernel, context, r].us:.0f} µs, {by[kernel, context, r].x_floor:.2f}x, "
                f"{by[kernel, context, r].peak_share:.0%}" for r in rows]  # fmt: skip
        where = str(context) if kernel == ATTENTION else "any"
        lines.append(f"| {kernel} | {where} | " + " | ".join(line) + " |")
    return "\n".join(lines)


def _order(kernel: str) -> int:
    return [*GEMM_PHASES, LM_HEAD, ATTENTION].index(kernel)
