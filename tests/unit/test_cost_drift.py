"""The cost-drift summary: spreads over sittings and the sign of each correlation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from racer_bench.bench import bench_cost_drift as cost_drift


def drifting_timer():
    """A machine whose 1-token forward slows every sitting while bigger forwards do not:
    sitting s gives 1 token 10 + s ms and n tokens 10 + 2 n ms (no noise)."""
    calls = {"n": 0}

    def time_forward(n: int) -> float:
        sitting = calls["n"] // 6  # sizes [1, 4] x (1 warmup + 2 reps) per sitting
        calls["n"] += 1
        return ((10.0 + sitting) if n == 1 else (10.0 + 2 * n)) / 1e3

    return time_forward


def test_sittings_and_summary_follow_the_one_token_time() -> None:
    rows = cost_drift.sittings(drifting_timer(), [1, 4], count=3, reps=2)
    assert [row["ms"][1] for row in rows] == pytest.approx([10.0, 11.0, 12.0])
    assert [row["cost"][4] for row in rows] == pytest.approx([1.8, 18 / 11, 1.5])
    stats = cost_drift.summary(rows, [1, 4])
    assert list(stats) == [4]
    assert stats[4]["cost_min"] == pytest.approx(1.5) and stats[4]["cost_max"] == pytest.approx(1.8)
    assert stats[4]["cost_vs_1tok_ms"] < -0.99  # the ratio falls as the 1-token step slows
    assert math.isnan(stats[4]["ms_vs_1tok_ms"])  # the 4-token forward never moved
    assert cost_drift.one_token_ms(rows) == pytest.approx({"min": 10, "median": 11, "max": 12})
    text = cost_drift.table(rows, [1, 4])
    assert "10.00 to 12.00 ms" in text and "| 4 | 18.00 | 1.50 | 1.64 | 1.80 | -1.00 |" in text


def test_correlation() -> None:
    a = np.array([1.0, 2.0, 3.0])
    assert cost_drift.correlation(a, 2 * a) == pytest.approx(1.0)
    assert cost_drift.correlation(a, -a) == pytest.approx(-1.0)
    assert math.isnan(cost_drift.correlation(a, np.ones(3)))
