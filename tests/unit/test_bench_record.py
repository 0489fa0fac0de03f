"""Bench records name the code state from before the script wrote its own tracked outputs."""

from __future__ import annotations

from racer_bench.bench import common as bench
from racer_bench.record import folder as records


def test_the_git_state_is_read_once_at_the_first_call(monkeypatch) -> None:
    states = iter([{"git_sha": "abc", "git_dirty": False}, {"git_sha": "abc", "git_dirty": True}])
    monkeypatch.setattr(records, "git_state", lambda root: next(states))
    bench.code_state.cache_clear()
    try:
        assert bench.code_state()["git_dirty"] is False  # before the script's first write
        record = bench.bench_record({}, None)  # after it: the outputs are now modified
        assert record["git_sha"] == "abc" and record["git_dirty"] is False
    finally:
        bench.code_state.cache_clear()
