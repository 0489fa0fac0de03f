"""The interleaved speed harness behind scripts/bench_*.py, on the tiny model."""

from __future__ import annotations

from racer_bench.bench.bench_methods import contender
from racer_bench.bench.common import (
    bench_record,
    identical_count,
    interleave,
    loop_runner,
    markdown_table,
    setting_line,
)
from racer_bench.engine.drafter import NullDrafter
from racer_bench.system.hardware import LoadMeter
from tests.conftest import TINY_PROMPTS


def test_contenders_rotate_and_partial_results_are_reported():
    calls: list[str] = []

    def fake(name: str):
        def run(ids):
            calls.append(name)
            return list(ids[:2]), 0.5, []

        return run

    seen: list[int] = []
    tallies = interleave({"a": fake("a"), "b": fake("b")}, [[1, 2, 3]] * 3, progress=False,
                         on_prompt=lambda t, done: seen.append(done))  # fmt: skip
    assert calls == ["a", "b", "b", "a", "a", "b"]  # the order rotates with the prompt
    assert seen == [1, 2, 3]
    assert tallies["a"].tokens == 6 and tallies["a"].tokens_per_s == 6 / 1.5
    assert identical_count(tallies["a"], tallies["b"]) == 3


def test_bench_json_says_where_and_under_what_load_it_ran():
    meter = LoadMeter().start()
    tallies = interleave({"a": lambda ids: (list(ids), 0.5, [])}, [[1, 2]], progress=False)
    record = bench_record(tallies, meter.stop(1), "fast", prompts=1)
    assert record["hardware"]["id"] and record["hardware"]["label"]
    assert record["engine"] == "fast" and "git_sha" in record and "git_dirty" in record
    assert isinstance(record["load"]["alone"], bool)
    assert record["settings"] == {"prompts": 1}
    assert record["contenders"]["a"]["tokens"] == 2
    line = setting_line({"warning": "machine not alone"})
    assert record["hardware"]["label"] in line and "WARNING: machine not alone" in line


def test_loop_runner_pld_matches_ar_and_table_counts_it(tiny_target, compose_cfg):
    from hydra.utils import instantiate

    from racer_bench.config.construct import constructor_node

    pld = instantiate(constructor_node(compose_cfg("method=pld", "model=tiny_random").method))(
        vocab_size=tiny_target.vocab_size
    )
    runners = {"ar": loop_runner(tiny_target, NullDrafter(), 24),
               "pld": loop_runner(tiny_target, pld, 24)}  # fmt: skip
    prompts = [list(p) for p in TINY_PROMPTS[:3]]
    tallies = interleave(runners, prompts, progress=False)
    assert identical_count(tallies["pld"], tallies["ar"]) == 3
    assert tallies["ar"].mean_accepted == 1.0
    assert tallies["pld"].mean_accepted >= 1.0
    table = markdown_table(tallies, base="ar", reference="ar")
    assert "| pld |" in table and "3/3" in table


def test_method_setup_routes_scheduler_overrides(tiny_target):
    from racer_bench.bench.common import method_setup
    from racer_bench.engine.schedule.scheduler import ConfidenceScheduler, FixedScheduler

    drafter, scheduler = method_setup("racer", tiny_target, ["max_breadth=4"])
    assert isinstance(scheduler, FixedScheduler) and drafter.capacity == 15
    overrides = ["scheduler=confidence", "scheduler.profile=linear:0.1", "max_breadth=4"]
    drafter, scheduler = method_setup("racer", tiny_target, overrides)
    assert isinstance(scheduler, ConfidenceScheduler) and drafter.capacity == 63
    assert scheduler.profile(11) == 2.0 and drafter.max_breadth == 4
    runners = {"ar": loop_runner(tiny_target, NullDrafter(), 16),
               "racer": loop_runner(tiny_target, drafter, 16, scheduler)}  # fmt: skip
    tallies = interleave(runners, [list(TINY_PROMPTS[0])], progress=False)
    assert identical_count(tallies["racer"], tallies["ar"]) == 1


def test_contender_specs_expand_environment_variables(tiny_target, monkeypatch):
    """``'racer@max_breadth=$BREADTH'`` builds the drafter from the variable's value (the
    table keeps the spec as written, so it names no machine path)."""
    monkeypatch.setenv("BREADTH", "3")
    drafter, _ = contender("racer@max_breadth=$BREADTH", tiny_target)
    assert drafter.max_breadth == 3
