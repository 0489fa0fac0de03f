"""Schedulers: optimal prefix-closed selection, flat and steep curves, learning, removal only."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
import torch

from racer_bench.engine.schedule.acceptance import survival
from racer_bench.engine.schedule.cost import CostProfile, synthetic
from racer_bench.engine.schedule.scheduler import (
    ConfidenceOptions,
    ConfidenceScheduler,
    FixedScheduler,
    best_prefix,
)
from racer_bench.engine.structs import AuxBranch, Draft, Source
from racer_bench.engine.verify.greedy import greedy_accept

# Small hand-made trees (parent arrays, topological).
TREES = [
    [-1, 0, 1, 2],  # a chain
    [-1, -1, -1, 0, 0, 1],  # two levels
    [-1, 0, 0, 1, 1, 2, -1, 6],  # a binary tree and a second branch
    [-1, 0, 1, 0, 3, -1, 5, 5, 7],
]


def prefix_closed(keep: set[int], parents: list[int]) -> bool:
    return all(parents[i] < 0 or parents[i] in keep for i in keep)


def brute_force(parents: list[int], surv: list[float], costs: np.ndarray) -> float:
    """Best (1 + sum S) / cost over every prefix-closed subset."""
    best = -math.inf
    n = len(parents)
    for size in range(n + 1):
        for subset in itertools.combinations(range(n), size):
            if prefix_closed(set(subset), parents):
                best = max(best, (1 + sum(surv[i] for i in subset)) / costs[size])
    return best


def random_curve(rng: random.Random, n: int) -> np.ndarray:
    """A monotone cost curve with cost(1) = 1: flat stretches and jumps."""
    steps = [rng.choice([0.0, 0.0, 0.05, 0.3, 1.0]) for _ in range(n)]
    return np.concatenate([[1.0], 1.0 + np.cumsum(steps)])


@pytest.mark.parametrize("parents", TREES)
def test_selection_is_prefix_closed_and_optimal(parents: list[int]) -> None:
    rng = random.Random(len(parents))
    for _ in range(40):
        p = [rng.choice([0.05, 0.3, 0.5, 0.7, 0.95, 1.0]) for _ in parents]
        surv = survival(parents, p)
        costs = random_curve(rng, len(parents))
        keep, value = best_prefix(parents, surv, costs)
        assert prefix_closed(set(keep), parents)
        assert value == pytest.approx((1 + sum(surv[i] for i in keep)) / costs[len(keep)])
        assert value == pytest.approx(brute_force(parents, surv, costs))


def make_draft(parents: list[int], score: list[float] | None = None) -> Draft:
    n = len(parents)
    return Draft(
        tokens=torch.arange(10, 10 + n),
        parents=torch.tensor(parents),
        source=torch.full((n,), int(Source.RETRIEVAL), dtype=torch.int32),
        rank=torch.arange(n),
        score=None if score is None else torch.tensor(score),
    )


def target_accepts(draft: Draft, next_token: dict[int, int]) -> list[int]:
    """Greedy acceptance against a target whose next token after t is ``next_token[t]``."""
    tokens = draft.tokens.tolist()
    argmax = [next_token.get(-1, -5)] + [next_token.get(t, -5) for t in tokens]
    return greedy_accept(tokens, draft.parents.tolist(), argmax)[0]


def test_flat_curve_keeps_the_whole_candidate_tree() -> None:
    scheduler = ConfidenceScheduler(synthetic("flat"), ConfidenceOptions(prior_mean=0.05))
    draft = make_draft(TREES[3], [math.nan] * len(TREES[3]))
    plan = scheduler.schedule(draft)
    assert plan.draft is draft and plan.n_candidates == len(draft)
    assert plan.cost == 1.0 and plan.predicted_accepted == pytest.approx(sum(plan.survival))


def test_steep_curve_with_low_estimates_keeps_only_the_root() -> None:
    scheduler = ConfidenceScheduler(synthetic("steep"), ConfidenceOptions(prior_mean=0.2))
    plan = scheduler.schedule(make_draft(TREES[2]))
    assert len(plan.draft) == 0 and plan.n_candidates == len(TREES[2])
    assert plan.survival == [] and plan.predicted_accepted == 0.0 and plan.cost == 1.0


def test_a_cut_keeps_every_field_of_the_kept_nodes() -> None:
    # cost jumps after 3 tokens: exactly the two best nodes (one path) are worth verifying
    profile = CostProfile([1, 3, 4], [1.0, 1.0, 10.0])
    scheduler = ConfidenceScheduler(profile)
    draft = make_draft([-1, 0, -1, 2], [4.0, 4.0, 1.0, 1.0])
    for _ in range(6):  # teach it: the target continues 10, 11 (the score-4 path)
        plan = scheduler.schedule(draft)
        scheduler.learn(plan, target_accepts(plan.draft, {-1: 10, 10: 11}))
    plan = scheduler.schedule(draft)
    assert plan.draft.tokens.tolist() == [10, 11]
    assert plan.draft.parents.tolist() == [-1, 0]
    assert plan.draft.score.tolist() == [4.0, 4.0] and plan.draft.rank.tolist() == [0, 1]
    assert plan.survival[0] > 0.6 and plan.survival[1] <= plan.survival[0]


def test_aux_tokens_are_charged() -> None:
    profile = CostProfile([1, 4, 5], [1.0, 1.0, 10.0])
    draft = make_draft([-1, 0])
    draft.aux = AuxBranch(torch.tensor([1, 2, 3]), torch.tensor([1, 2, 3]),
                          torch.ones(3, 3, dtype=torch.bool))  # fmt: skip
    plan = ConfidenceScheduler(profile).schedule(draft)
    assert len(plan.draft) == 0 and plan.cost == 1.0  # root + 3 aux tokens already cost 4


def test_learning_resets_per_call_unless_persistent() -> None:
    draft = make_draft([-1])
    for persist, expected in ((False, 0.5), (True, (0 + 1) / (5 + 2))):
        scheduler = ConfidenceScheduler(
            synthetic("flat"), ConfidenceOptions(persist_across_prompts=persist)
        )
        for _ in range(5):
            scheduler.learn(scheduler.schedule(draft), [])
        scheduler.reset()  # a new generation call
        assert scheduler.estimator.estimate([(9, 9, 9, 9)])[0] == pytest.approx(expected)


def test_fixed_scheduler_verifies_everything() -> None:
    draft = make_draft(TREES[1])
    plan = FixedScheduler().schedule(draft)
    assert plan.draft is draft and plan.survival is None and plan.predicted_accepted is None
    FixedScheduler().learn(plan, [0])


def test_bad_scheduler_keys_are_rejected_before_loading(compose_cfg) -> None:
    from racer_bench.errors import ConfigError
    from racer_bench.run.config import validate

    for key, message in (("explore=-1.0", "must be a number >= 0"),
                         ("prior_mean=1.5", "scheduler.prior_mean=1.5"),
                         ("profile=wobbly", "scheduler.profile=wobbly")):  # fmt: skip
        cfg = compose_cfg("model=tiny_random", "scheduler=confidence", f"scheduler.{key}")
        with pytest.raises(ConfigError, match=message):
            validate(cfg)


def test_counterfactual_trials_judge_cut_nodes_by_the_committed_tokens() -> None:
    from racer_bench.engine.schedule.scheduler import counterfactual_trials

    # root children 0 (tok 5), 1 (tok 6); 0's children 2 (tok 7), 3 (tok 8); 3's child 4 (tok 9)
    parents, tokens = [-1, -1, 0, 0, 3], [5, 6, 7, 8, 9]
    # the verifier accepted node 0; the bonus was 8: cut node 3 would have been accepted,
    # its child 4 is unknown (no trial), node 1 (a sibling of the accepted 0) was not
    assert counterfactual_trials(parents, tokens, [0], [5, 8]) == [
        (0, True), (1, False), (2, False), (3, True)
    ]  # fmt: skip
    # nothing accepted, bonus 6: node 1 would have been; 0's children are no trials
    assert counterfactual_trials(parents, tokens, [], [6]) == [(0, False), (1, True)]


def test_a_bucket_judged_poor_recovers_from_cut_candidates() -> None:
    """Without learn_pruned a bucket whose estimate falls below the cost is never verified again."""
    profile = CostProfile([1, 2, 3], [1.0, 1.6, 2.2])
    draft = make_draft([-1], [4.0])
    kept = {}
    for learn_pruned in (False, True):
        scheduler = ConfidenceScheduler(profile, ConfidenceOptions(learn_pruned=learn_pruned))
        for step in range(40):
            plan = scheduler.schedule(draft)
            accepted = target_accepts(plan.draft, {-1: 10 if step >= 4 else 99})
            committed = [10 if step >= 4 else 99]  # the target starts agreeing after 4 steps
            scheduler.learn(plan, accepted, committed)
        kept[learn_pruned] = len(scheduler.schedule(draft).draft)
    assert kept == {False: 0, True: 1}


def test_probability_scores_are_the_back_off_of_their_own_bucket() -> None:
    """With score_prior a node starts from its drafter's probability, then follows its bucket."""
    draft = make_draft([-1, -1], [0.9, 0.1])
    draft.score_is_probability = True
    scheduler = ConfidenceScheduler(synthetic("flat"))
    first = scheduler.schedule(draft).survival
    assert first == pytest.approx([0.9, 0.1])
    plain = (
        ConfidenceScheduler(synthetic("flat"), ConfidenceOptions(score_prior=False))
        .schedule(draft)
        .survival
    )
    assert plain == pytest.approx([0.5, 0.5])
    for _ in range(30):  # the target never takes the 0.9 node (token 10) and always token 11
        plan = scheduler.schedule(draft)
        scheduler.learn(plan, target_accepts(plan.draft, {-1: 11}), [11])
    late = scheduler.schedule(draft).survival
    assert late[0] < 0.2 and late[1] > 0.8


def test_candidate_budget_follows_the_trees_it_keeps() -> None:
    """At least min_candidates; twice the largest kept tree of the window; reset per call."""
    scheduler = ConfidenceScheduler(
        synthetic("flat"), ConfidenceOptions(min_candidates=4, candidate_window=2)
    )
    assert scheduler.candidate_budget() == 4
    chain = make_draft(list(range(-1, 9)))  # 10 nodes, kept whole on a flat curve
    scheduler.learn(scheduler.schedule(chain), [])
    assert scheduler.candidate_budget() == 20
    for _ in range(2):  # the window forgets the big tree once two small steps follow it
        scheduler.learn(scheduler.schedule(make_draft([-1])), [])
    assert scheduler.candidate_budget() == 4
    scheduler.learn(scheduler.schedule(chain), [])
    scheduler.reset()
    assert scheduler.candidate_budget() == 4
    fixed_offer = ConfidenceScheduler(
        synthetic("flat"), ConfidenceOptions(adaptive_candidates=False)
    )
    assert fixed_offer.candidate_budget() is None and FixedScheduler().candidate_budget() is None
