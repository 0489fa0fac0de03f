"""Which batches a vLLM run times at a batch size (pure planning, no vLLM)."""

from __future__ import annotations

import pytest

from racer_bench.vllm_backend.batching import passes_needed, plan_batches, plan_summary


def worth(plan, n_prompts: int, size: int) -> float:
    """Full batches' worth of a plan: a partial batch counts by its fill."""
    return sum((b.stop - b.start) / min(size, n_prompts) for b in plan)


@pytest.mark.parametrize(
    ("n", "size", "passes"),
    [(20, 16, 4), (20, 4, 1), (20, 1, 1), (4, 16, 5), (20, 8, 2), (7, 4, 3), (0, 4, 0)],
)
def test_passes_until_min_batches_full_batches_worth(n, size, passes):
    assert passes_needed(n, size, 5) == passes


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 10, 16, 20, 33])
@pytest.mark.parametrize("size", [1, 2, 4, 8, 16, 64])
@pytest.mark.parametrize("min_batches", [1, 5, 8])
def test_the_fewest_passes_that_reach_min_batches(n, size, min_batches):
    plan = plan_batches(n, size, min_batches)
    assert worth(plan, n, size) >= min_batches - 1e-9
    assert len(plan) >= min_batches
    passes = passes_needed(n, size, min_batches)
    if passes > 1:  # one pass fewer would not do
        assert worth(plan_batches(n, size, 1), n, size) * (passes - 1) < min_batches


def test_twenty_prompts_at_sixteen_repeat_whole_passes():
    plan = plan_batches(20, 16, 5)
    assert [(b.repeat, b.batch, b.start, b.stop) for b in plan[:3]] == [
        (0, 0, 0, 16), (0, 1, 16, 20), (1, 0, 0, 16)
    ]  # fmt: skip
    assert len(plan) == 8 and {b.repeat for b in plan} == {0, 1, 2, 3}
    for r in range(4):  # every pass asks every prompt once
        covered = [i for b in plan if b.repeat == r for i in range(b.start, b.stop)]
        assert covered == list(range(20))
    assert plan_summary(20, 16, 5) == {"passes": 4, "timed_batches": 8, "full_batches": 4}


def test_enough_batches_need_no_repeat():
    plan = plan_batches(20, 1, 5)
    assert len(plan) == 20 and {b.repeat for b in plan} == {0}
    assert plan_summary(20, 4, 5) == {"passes": 1, "timed_batches": 5, "full_batches": 5}
