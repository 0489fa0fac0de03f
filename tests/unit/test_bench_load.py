"""scripts/bench_load.py: contenders become CLI overrides."""

from __future__ import annotations

from tests.scripts import load_script


def test_a_contender_becomes_method_and_scheduler_overrides():
    overrides = load_script("bench_load").contender_overrides
    assert overrides("pld") == ["method=pld", "scheduler=fixed"]  # a bare name: its YAML's sizes
    spec = "racer@capacity=5+scheduler=confidence+scheduler.explore=0.1"
    assert overrides(spec) == ["method=racer", "scheduler=confidence", "scheduler.explore=0.1",
                               "method.capacity=5"]  # fmt: skip
