"""Which batches a ``backend=vllm`` run times at one batch size (pure; no vLLM).

A speedup at a batch size is measured over batches, so its interval needs several of them: at
a batch size where one pass over the prompts makes fewer than ``backend.min_batches`` timed
batches (20 prompts at batch 16: 16 + 4), the run makes more passes over the same prompts,
each cut into batches the same way, until there are enough. Each pass is a whole pass, so
every prompt is asked equally often and per-request means stay unweighted.

**A partial last batch** (the 4 of 16 + 4) is timed and kept, but counts toward
``min_batches`` only by its fill: ``len / size``, 0.25 there, so a pass of 20 prompts at 16
counts 1.25 and 4 passes are made (4 full batches of 16 and 4 of 4: 5 full batches' worth),
not 3 (only 3 batches at the size the column is labelled with). A batch can hold at most every
prompt, so with fewer prompts than the batch size (4 prompts at 16) the one batch of a pass is
full and counts 1 (the batch size itself is not reached; the run says so).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlannedBatch:
    """One timed batch: prompts ``start:stop`` of pass ``repeat`` (0: the first pass)."""

    repeat: int
    batch: int  # its number within the pass
    start: int
    stop: int


def passes_needed(n_prompts: int, size: int, min_batches: int) -> int:
    """Passes over ``n_prompts`` at batch ``size`` that make ``min_batches`` full batches'
    worth of timed batches (a partial last batch counts by its fill; module docstring)."""
    if n_prompts <= 0:
        return 0
    full = min(size, n_prompts)  # the most prompts a batch can hold
    # one pass counts n_prompts / full batches: the smallest passes with passes * that >= min
    return max(1, -(-min_batches * full // n_prompts))


def plan_batches(n_prompts: int, size: int, min_batches: int = 1) -> list[PlannedBatch]:
    """Every timed batch at one batch size, in run order: pass by pass, batch by batch."""
    starts = range(0, n_prompts, size)
    return [PlannedBatch(r, c, s, min(s + size, n_prompts))
            for r in range(passes_needed(n_prompts, size, min_batches))
            for c, s in enumerate(starts)]  # fmt: skip


def plan_summary(n_prompts: int, size: int, min_batches: int) -> dict[str, int]:
    """What :func:`plan_batches` gives at one batch size (recorded in the manifest)."""
    plan = plan_batches(n_prompts, size, min_batches)
    largest = max((b.stop - b.start for b in plan), default=0)
    return {"passes": passes_needed(n_prompts, size, min_batches), "timed_batches": len(plan),
            "full_batches": sum(b.stop - b.start == largest for b in plan)}  # fmt: skip
