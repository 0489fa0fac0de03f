"""Repeats of a run: ids, order, the two-level interval and the speedup of each repeat."""

from __future__ import annotations

import numpy as np

from racer_bench.analysis import metrics
from racer_bench.record.folder import repeat_id
from racer_bench.run.runner import prompts_to_run
from racer_bench.tasks.base import Prompt


def record(index: int, repeat: int, method_s: float, base_s: float) -> dict:
    """A prompt line with 10 new tokens per mode, timed as given."""
    turn = {"tokens": list(range(10)), "prefill_time": 0.0}
    return {"index": index, "repeat": repeat, "status": "ok",
            "method": {"turns": [turn | {"decode_time": method_s}]},
            "baseline": {"turns": [turn | {"decode_time": base_s}]}}  # fmt: skip


def test_repeat_ids_keep_the_first_repeat_as_the_prompt_id() -> None:
    assert repeat_id("he/3", 0) == "he/3" and repeat_id("he/3", 2) == "he/3#r2"


def test_prompts_run_repeat_major_and_skip_what_is_done() -> None:
    prompts = [Prompt(id=f"p/{i}", category="c", turns=["x"]) for i in range(2)]
    todo = prompts_to_run(prompts, 2, done={"p/0", "p/1#r1"})
    assert [(r, i) for r, i, _ in todo] == [(0, 1), (1, 0)]


def test_the_speedup_of_each_repeat() -> None:
    records = [record(0, 0, 1.0, 2.0), record(1, 0, 1.0, 2.0), record(0, 1, 2.0, 2.0)]
    assert metrics.speedup_per_repeat(records) == [2.0, 1.0]


def test_an_interval_over_repeats_is_wider_when_repeats_disagree() -> None:
    """Same prompts, same per-prompt spread: one run whose repeats agree, one whose second
    repeat ran slower; resampling repeats must widen the second interval."""
    agree = [record(i, r, 1.0 + 0.01 * i, 2.0) for r in range(3) for i in range(6)]
    drift = [
        record(i, r, (1.0 + 0.01 * i) * (1.0 + 0.3 * r), 2.0) for r in range(3) for i in range(6)
    ]
    width = [np.diff(metrics.speedup_ci(rs)).item() for rs in (agree, drift)]
    assert width[1] > 5 * width[0]


def test_one_repeat_keeps_the_prompt_bootstrap() -> None:
    """Records without a ``repeat`` key (every run made before repeats existed) resample as
    before, so their saved intervals still recompute."""
    records = [record(i, 0, 1.0 + 0.1 * i, 2.0) for i in range(5)]
    old_style = [{k: v for k, v in r.items() if k != "repeat"} for r in records]
    assert metrics.speedup_ci(records) == metrics.speedup_ci(old_style)
