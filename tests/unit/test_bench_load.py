"""scripts/bench_load.py (racer_bench.bench.bench_load): contenders become CLI overrides."""

from __future__ import annotations

from racer_bench.bench.bench_load import contender_overrides as overrides


def test_a_contender_becomes_method_and_scheduler_overrides():
    assert overrides("pld") == ["method=pld", "scheduler=fixed"]  # a bare name: its YAML's sizes
    spec = "racer@capacity=5+scheduler=confidence+scheduler.explore=0.1"
    assert overrides(spec) == ["method=racer", "scheduler=confidence", "scheduler.explore=0.1",
                               "method.capacity=5"]  # fmt: skip
