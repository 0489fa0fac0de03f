"""Does the target's cost curve hold from one minute to the next? Repeated measurements of it.

The confidence scheduler sizes trees from ``cost(N)`` (:mod:`racer_bench.engine.schedule.cost`), the
time
of an N-token forward over a 1-token one, measured once at a run's start. :func:`sittings`
measures the curve again and again in one process, back to back, and keeps each sitting's
1-token time beside its costs; :func:`summary` says how far the costs spread and whether they
move with the 1-token time (the memory-bound step) or against it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

from racer_bench.engine.schedule import cost


def sittings(
    time_forward: cost.TimeForward, sizes: Sequence[int], count: int, reps: int = 5
) -> list[dict[str, Any]]:
    """``count`` back-to-back :func:`~racer_bench.engine.schedule.cost.measure_cost` runs over
    ``sizes``
    (interleaved repetitions, medians): per sitting, each size's median ms and raw cost."""
    from tqdm.auto import tqdm

    rows = []
    for _ in tqdm(range(count), desc="cost curve", unit="sitting"):
        profile = cost.measure_cost(time_forward, sizes, reps, progress=False)
        meta = profile.meta
        rows.append({
            "ms": {n: s * 1e3 for n, s in zip(profile.sizes, meta["median_seconds"], strict=True)},
            "cost": dict(zip(profile.sizes, meta["raw_costs"], strict=True)),
        })  # fmt: skip
    return rows


def summary(rows: Sequence[dict[str, Any]], sizes: Sequence[int]) -> dict[int, dict[str, float]]:
    """Per size (> 1): the spread of its cost over the sittings (min, median, max), and the
    correlation over sittings of its cost and of its own ms with the 1-token ms."""
    one = np.array([row["ms"][1] for row in rows])
    out = {}
    for n in sizes:
        if n == 1:
            continue
        costs = np.array([row["cost"][n] for row in rows])
        ms = np.array([row["ms"][n] for row in rows])
        out[n] = {
            "cost_min": float(costs.min()), "cost_median": float(statistics.median(costs)),
            "cost_max": float(costs.max()),
            "cost_vs_1tok_ms": correlation(costs, one), "ms_vs_1tok_ms": correlation(ms, one),
        }  # fmt: skip
    return out


def one_token_ms(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """The 1-token forward's ms over the sittings: min, median, max."""
    one = [row["ms"][1] for row in rows]
    return {"min": min(one), "median": statistics.median(one), "max": max(one)}


def correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson's r of two series (nan when either is constant)."""
    if len(a) < 2 or np.std(a) == 0 or np.std(b) == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def table(rows: Sequence[dict[str, Any]], sizes: Sequence[int]) -> str:
    """Markdown: per size, median ms and cost spread over sittings, and the correlations."""
    stats, one = summary(rows, sizes), one_token_ms(rows)
    lines = [
        f"1-token forward over {len(rows)} sittings: {one['min']:.2f} to {one['max']:.2f} ms "
        f"(median {one['median']:.2f})\n",
        "| tokens in forward | median ms | cost min | cost median | cost max "
        "| r(cost, 1-token ms) | r(ms, 1-token ms) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, s in stats.items():
        ms = statistics.median(row["ms"][n] for row in rows)
        lines.append(
            f"| {n} | {ms:.2f} | {s['cost_min']:.2f} | {s['cost_median']:.2f} | "
            f"{s['cost_max']:.2f} | {s['cost_vs_1tok_ms']:+.2f} | {s['ms_vs_1tok_ms']:+.2f} |"
        )
    return "\n".join(lines)
