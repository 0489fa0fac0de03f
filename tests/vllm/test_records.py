"""vLLM outputs as native records: step reconstruction and per-position acceptance (pure)."""

from __future__ import annotations

import math

from racer_bench.analysis import metrics
from racer_bench.vllm_backend.step_records import steps_from_counts, steps_from_notes, turn_record


def test_counts_fill_the_steps_without_a_draft_and_commit_every_token():
    steps = steps_from_counts([2, 0], [3, 3], n_tokens=8)  # 7 committed: 3 + 1 by drafts
    assert steps == [(3, 2), (3, 0), (0, 0), (0, 0), (0, 0)]
    assert sum(a + 1 for _, a in steps) == 7


def test_counts_past_the_stop_are_cut():
    steps = steps_from_counts([3, 4], [4, 4], n_tokens=6)  # vLLM counted 4 accepted after EOS
    assert steps == [(4, 3), (4, 0)]
    assert sum(a + 1 for _, a in steps) == 5


def test_notes_pair_each_chain_with_the_next_calls_acceptance():
    notes = [
        {"a": None, "ar": 0, "c": 3, "t": 0.1, "hr": 1},
        {"a": 2, "ar": 2, "c": 0, "t": 0.2, "hr": 0},
        {"a": 0, "ar": 0, "c": 2, "t": 0.3, "hr": 1},
        {"a": 1, "ar": 1, "c": 2, "t": 0.4, "hr": 1},  # the last chain is never verified
    ]
    steps = steps_from_notes(notes, n_tokens=1 + 3 + 1 + 2)
    assert [(s["n_draft"], s["n_accepted"]) for s in steps] == [(3, 2), (0, 0), (2, 1)]
    assert [s["t_draft"] for s in steps] == [0.1, 0.2, 0.3]


def test_per_position_acceptance_divides_by_drafting_steps():
    steps = [{"n_draft": 3, "n_accepted": 2}, {"n_draft": 3, "n_accepted": 0},
             {"n_draft": 0, "n_accepted": 0}, {"n_draft": 3, "n_accepted": 3}]  # fmt: skip
    record = {"method": {"turns": [turn_record([1] * 9, "", 1.0, "eos", steps)]}}
    assert metrics.acceptance_at_least([record], "method", 3) == [2 / 3, 2 / 3, 1 / 3]
    assert metrics.mat([record]) == (3 + 1 + 1 + 4) / 4
    empty = {"method": {"turns": [turn_record([1], "", 1.0, "eos", [])]}}
    assert all(math.isnan(v) for v in metrics.acceptance_at_least([empty], "method", 2))
