"""Start-up timing (racer_bench.run.startup) and its summary line."""

from __future__ import annotations

import time

import pytest

from racer_bench.analysis.report import setting_lines, startup_line
from racer_bench.run import startup as startup_module
from racer_bench.run.startup import BEFORE_BUILD, Startup, process_age_s


def test_phases_add_up_in_the_order_they_ran_and_the_process_age_comes_first() -> None:
    started = Startup()
    started.begin()
    with started.phase("model"):
        time.sleep(0.02)
    with started.phase("method"):
        pass
    with started.phase("model"):  # a recurring phase adds up
        time.sleep(0.02)
    started.ready()
    with started.warmup():
        time.sleep(0.01)
    record = started.to_dict()
    assert list(record["phases"]) == [BEFORE_BUILD, "model", "method"]
    assert record["phases"]["model"] >= 0.04
    assert record["phases"][BEFORE_BUILD] <= record["ready_s"]
    assert sum(record["phases"].values()) <= record["ready_s"] + 0.01
    assert record["warmup_s"] >= 0.01


def test_a_phase_that_raises_is_still_timed() -> None:
    started = Startup()
    with pytest.raises(ValueError), started.phase("model"):
        raise ValueError("no weights")
    assert "model" in started.phases


def test_without_a_process_clock_there_is_no_ready_time_and_no_line(monkeypatch) -> None:
    monkeypatch.setattr(startup_module, "process_age_s", lambda: None)
    started = Startup()
    started.begin()
    started.ready()
    assert BEFORE_BUILD not in started.phases and started.to_dict()["ready_s"] is None
    assert startup_line(started.to_dict()) is None


def test_the_process_age_grows() -> None:
    first = process_age_s()
    time.sleep(0.02)
    assert first is not None and process_age_s() >= first + 0.015


def test_the_summary_prints_the_start_in_one_line() -> None:
    summary = {"startup": {"ready_s": 12.34, "warmup_s": 5.0,
                           "phases": {BEFORE_BUILD: 6.1, "model": 4.04, "floor": 0.0}}}  # fmt: skip
    line = startup_line(summary["startup"])
    assert line == ("start-up: 12.3 s to the first prompt (imports and config 6.1, model 4.0, "
                    "floor 0.0), then warm-up 5.0 s")  # fmt: skip
    assert line in setting_lines(summary)
    assert not any(x.startswith("start-up") for x in setting_lines({}))
