"""Per-step draft lengths over a vLLM batch (pure: no vLLM)."""

from __future__ import annotations

import itertools

import pytest
import torch

from racer_bench.engine.structs import Draft, Source
from racer_bench.vllm_backend.adapter import DrafterPool
from racer_bench.vllm_backend.budget import BatchBudget, StepCost, StepCurve, allocate
from tests.vllm.test_adapter import Recorder


def value(survivals: list[list[float]], kept: tuple[int, ...] | list[int], curve: StepCurve):
    """Expected tokens per second of one choice of kept lengths."""
    b = len(survivals)
    tokens = b + sum(sum(s[:k]) for s, k in zip(survivals, kept, strict=True))
    return tokens / curve.costs(b, sum(kept))[sum(kept)]


@pytest.mark.parametrize("per_token", [0.0, 0.02, 0.2, 2.0])
@pytest.mark.parametrize("zero", [None, 0.5, 5.0])
def test_allocate_finds_the_best_lengths_of_any_choice(per_token: float, zero: float | None):
    survivals = [[0.9, 0.7, 0.2], [0.4, 0.1], [], [0.95, 0.9, 0.85, 0.3]]
    curve = StepCurve(1.0, per_token, zero)
    best = max(value(survivals, kept, curve)
               for kept in itertools.product(*[range(len(s) + 1) for s in survivals]))  # fmt: skip
    assert value(survivals, allocate(survivals, curve), curve) == pytest.approx(best)


def test_a_flat_cost_keeps_every_chain_and_a_steep_one_keeps_none() -> None:
    survivals = [[0.9, 0.5], [0.3]]
    assert allocate(survivals, StepCurve(1.0, 0.0)) == [2, 1]
    assert allocate(survivals, StepCurve(1.0, 10.0)) == [0, 0]
    # in between: only the surest token pays for its cost
    assert allocate(survivals, StepCurve(1.0, 1.0)) == [1, 0]
    # a step that drafts nothing costs less than the line says: drafting must pay for the jump
    assert allocate(survivals, StepCurve(1.0, 0.1)) == [2, 1]
    assert allocate(survivals, StepCurve(1.0, 0.1, zero=0.8)) == [0, 0]


def test_step_cost_fits_a_line_per_batch_size_and_borrows_the_nearest() -> None:
    cost = StepCost(min_samples=4)
    assert cost.curve(4) is None
    for tokens in (5, 8, 12, 16, 20, 24):
        cost.observe(4, tokens, 0.1 + 0.01 * tokens)
    cost.observe(4, 8, 5.0)  # one step slowed by something else: the median ignores it
    cost.observe(4, 8, 0.18)
    curve = cost.curve(4)
    assert curve.intercept == pytest.approx(0.1, abs=1e-6)
    assert curve.per_token == pytest.approx(0.01, abs=1e-6) and curve.zero is None
    assert cost.curve(16) == curve  # no fit for 16 yet: the nearest batch size's
    for _ in range(5):
        cost.observe(1, 3, 0.05)
    assert cost.curve(1).per_token == curve.per_token  # one token count: no slope, borrowed
    for _ in range(3):  # steps of 4 requests that drafted nothing: timed apart from the line
        cost.observe(4, 4, 0.09)
    assert cost.curve(4).zero == pytest.approx(0.09)
    assert cost.curve(4).per_token == curve.per_token


def test_the_budget_learns_that_poor_nodes_fail_and_stops_verifying_them() -> None:
    budget = BatchBudget(cost=StepCost(min_samples=1))
    chain = Draft.chain([5, 6, 7], Source.RETRIEVAL)
    start = budget.estimate(chain).survival[0]
    for _ in range(30):  # the first node is always wrong: the target commits 9
        budget.learn(budget.estimate(chain), 0, [9])
    assert budget.estimate(chain).survival[0] < start / 4


def test_cut_node_outcomes_are_learnt_from_the_committed_token() -> None:
    budget = BatchBudget()
    chain = Draft.chain([5, 6], Source.RETRIEVAL)
    estimate = budget.estimate(chain)
    for _ in range(30):  # verified nothing (cut to 0), but the committed token was the draft's
        budget.learn(estimate, 0, [5])
    assert budget.estimate(chain).survival[0] > 0.9


def test_the_pool_sends_the_cut_chain_and_feeds_back_what_was_verified() -> None:
    budget = BatchBudget(cost=StepCost(min_samples=2))
    pool = DrafterPool(lambda: Recorder([7, 8, 9]), max_chain=3, budget=budget)
    for tokens in (2, 3, 4):  # a steep measured cost at batch 1: no chain token pays
        budget.cost.observe(1, tokens, 1.0 * tokens)
    budget.tick(0.0, frozenset({"a"}), pure=False)
    chain, note = pool.propose("a", [1, 4], 1, None)
    assert chain == [7, 8, 9] and pool.live["a"].estimate is not None
    kept = budget.cut([pool.live["a"].estimate])
    assert kept == [0]
    assert pool.cut("a", kept[0], note) == [] and note.chain == 0 and not note.has_retrieval
    pool.propose("a", [1, 4, 7], 1, torch.tensor([[7, 0]]))  # an AR step committed 7
    fb = pool.live["a"].drafter.feedback[-1]
    assert fb.draft.tokens.tolist() == [] and fb.committed == [7]
    assert budget.estimator.counts[0]  # the cut node 7 was counted (as accepted)


def test_the_clock_samples_pure_decode_steps_of_the_same_requests_only() -> None:
    budget = BatchBudget()
    est = budget.estimate(Draft.chain([1, 2], Source.RETRIEVAL))
    budget.tick(0.0, frozenset({"a", "b"}), pure=False)
    budget.cut([est, est])  # no fit yet: both whole, 2 * (1 + 2) tokens verified
    budget.tick(0.5, frozenset({"a", "b"}), pure=True)
    assert list(budget.cost.samples[2]) == [(6, 0.5)]
    budget.cut([est, None])
    budget.tick(0.9, frozenset({"a"}), pure=True)  # b left: another batch, no sample
    budget.tick(1.0, frozenset({"a"}), pure=False)  # a request joined: no sample
    assert 1 not in budget.cost.samples
