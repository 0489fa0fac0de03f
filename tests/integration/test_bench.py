"""The interleaved speed harness behind scripts/bench_*.py, on the tiny model."""

from __future__ import annotations

from racer_bench.bench import identical_count, interleave, loop_runner, markdown_table
from racer_bench.engine.drafter import NullDrafter
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


def test_loop_runner_pld_matches_ar_and_table_counts_it(tiny_target, compose_cfg):
    from hydra.utils import instantiate

    pld = instantiate(compose_cfg("method=pld", "model=tiny_random").method)(
        vocab_size=tiny_target.vocab_size
    )
    runners = {"ar": loop_runner(tiny_target, NullDrafter(), 24),
               "pld": loop_runner(tiny_target, pld, 24)}  # fmt: skip
    prompts = [list(p) for p in TINY_PROMPTS[:3]]
    tallies = interleave(runners, prompts, progress=False)
    assert identical_count(tallies["pld"], tallies["ar"]) == 3
    assert tallies["ar"].mat == 1.0
    assert tallies["pld"].mat >= 1.0
    table = markdown_table(tallies, base="ar", reference="ar")
    assert "| pld |" in table and "3/3" in table
