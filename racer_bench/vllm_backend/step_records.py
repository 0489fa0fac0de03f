"""vLLM outputs as the harness's prompt records, so one set of metrics serves both backends.

A turn record has the native loop's columns (``tokens``, ``text``, times, ``steps``). Steps come
from our proposer's step log where it ran (exact order, chain lengths, retrieval counts,
proposer time) and otherwise from vLLM's per-request spec-decode counters, which list only the
steps that verified a draft: the steps without one are appended after them (their order within
a turn is unknown there; no metric depends on it). Either way the accepted counts are cut so
that a turn's committed tokens equal its new tokens minus the first (from the prefill), as the
native loop cuts at EOS, and MAT keeps one definition: committed tokens per verification step.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from racer_bench.record import folder as records


def steps_from_counts(
    accepted: Sequence[int], drafted: Sequence[int], n_tokens: int
) -> list[tuple[int, int]]:
    """(drafted, accepted) per step from per-draft-step counts plus the draft-less steps.

    ``n_tokens`` is the turn's new tokens; every step commits accepted + 1 tokens, and the
    first token comes from the prefill, so the steps commit ``n_tokens - 1`` in all.
    """
    steps: list[tuple[int, int]] = []
    left = max(n_tokens - 1, 0)
    for a, d in zip(accepted, drafted, strict=False):
        if left <= 0:
            break
        a = min(a, left - 1)  # vLLM counts drafts accepted past the stop token
        steps.append((d, a))
        left -= a + 1
    steps += [(0, 0)] * left
    return steps


def steps_from_notes(notes: Sequence[dict[str, Any]], n_tokens: int) -> list[dict[str, int]]:
    """Steps from our proposer's notes on one request (one note per proposer call).

    Note ``i`` carries the chain proposed at call ``i`` (``c``) and how many nodes of the chain
    proposed at call ``i - 1`` were accepted (``a``): step ``i - 1`` verified chain ``i - 1``.
    """
    steps = []
    for before, after in pairwise(notes):
        a = after["a"] if after["a"] is not None and after["a"] >= 0 else 0
        steps.append({"n_draft": before["c"], "n_accepted": a, "retrieval": after["ar"],
                      "t_draft": before["t"], "has_retrieval": before.get("hr", 0)})  # fmt: skip
    left = max(n_tokens - 1, 0)
    kept = []
    for step in steps:
        if left <= 0:
            break
        step["n_accepted"] = min(step["n_accepted"], left - 1)
        step["retrieval"] = min(step["retrieval"], step["n_accepted"])
        kept.append(step)
        left -= step["n_accepted"] + 1
    kept += [{"n_draft": 0, "n_accepted": 0, "retrieval": 0, "t_draft": 0.0,
              "has_retrieval": 0}] * left  # fmt: skip
    return kept


def step_columns(steps: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
    """The native record's column-wise ``steps`` block."""
    n = len(steps)
    return {
        "n_draft": [s["n_draft"] for s in steps],
        "depth": [s["n_draft"] for s in steps],  # chains: depth = length
        "n_accepted": [s["n_accepted"] for s in steps],
        "n_committed": [s["n_accepted"] + 1 for s in steps],
        "t_draft": [s.get("t_draft", 0.0) for s in steps],
        "t_verify": [0.0] * n,  # not separable inside vLLM's step
        "t_update": [0.0] * n,
        "n_relaxed": [0] * n,
        "regret": [0.0] * n,
        "has_retrieval": [int(s.get("has_retrieval", 0)) for s in steps],
        "accepted_retrieval": [s.get("retrieval", 0) for s in steps],
        "accepted_ranks": [[] for _ in steps],
        "meta": {},
    }


def counts_as_steps(accepted: Sequence[int], drafted: Sequence[int], n_tokens: int) -> list[dict]:
    """:func:`steps_from_counts` in the dict form :func:`step_columns` takes."""
    return [
        {"n_draft": d, "n_accepted": a} for d, a in steps_from_counts(accepted, drafted, n_tokens)
    ]


def turn_record(
    tokens: list[int], text: str, seconds: float, stop_reason: str, steps: list[dict[str, Any]]
) -> dict[str, Any]:
    """One turn in the native record's shape (all of the batch-attributed time is decode)."""
    return records.turn_record(
        tokens, text, stop_reason, decode_time=seconds, steps=step_columns(steps)
    )
