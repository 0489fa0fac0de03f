"""Acceptance estimates: features, trials, Beta updates with back-off, survival."""

from __future__ import annotations

import math

import pytest
import torch

from racer_bench.engine.schedule.acceptance import (
    NO_VALUE,
    AcceptanceEstimator,
    node_features,
    rank_bucket,
    score_bucket,
    survival,
    trials,
)
from racer_bench.engine.structs import Draft


def test_rank_and_score_buckets() -> None:
    assert [rank_bucket(r) for r in (-1, 0, 1, 3, 4, 7, 8, 15, 16, 40)] == [
        NO_VALUE, 0, 1, 3, 4, 4, 8, 8, 16, 32,
    ]  # fmt: skip
    assert [score_bucket(s) for s in (1, 2, 3, 4, 10)] == [0, 2, 3, 4, 6]
    assert [score_bucket(p) for p in (0.9, 0.5, 0.1)] == [-1, -2, -7]
    assert score_bucket(math.nan) == NO_VALUE
    assert len({score_bucket(0.0), score_bucket(-1.0), score_bucket(math.nan)}) == 3


def test_node_features_without_optional_fields() -> None:
    draft = Draft(torch.tensor([5, 6, 7]), torch.tensor([-1, 0, -1]))
    assert node_features(draft) == [(0, 1, NO_VALUE, NO_VALUE), (0, 2, NO_VALUE, NO_VALUE),
                                     (0, 1, NO_VALUE, NO_VALUE)]  # fmt: skip
    draft.source = torch.tensor([1, 1, 2], dtype=torch.int32)
    draft.rank = torch.tensor([-1, -1, 2])
    draft.score = torch.tensor([3.0, math.nan, 0.5])
    assert node_features(draft, max_depth=1) == [(1, 1, NO_VALUE, 3), (1, 1, NO_VALUE, NO_VALUE),
                                                 (2, 1, 2, -2)]  # fmt: skip


def test_trials_only_count_nodes_whose_parent_was_accepted() -> None:
    # 0 -> 1 -> 2, 0 -> 3, root -> 4 -> 5; accepted path 0, 1
    parents = [-1, 0, 1, 0, -1, 4]
    assert trials(parents, [0, 1]) == [(0, True), (1, True), (2, False), (3, False), (4, False)]
    assert trials(parents, []) == [(0, False), (4, False)]


def test_prior_then_beta_updates_with_backoff() -> None:
    est = AcceptanceEstimator(prior_mean=0.25, prior_strength=4.0, backoff_strength=2.0)
    a, b = (1, 1, 0, 0), (1, 2, 0, 0)  # same source, different depth
    assert est.estimate([a, b]) == pytest.approx([0.25, 0.25])
    # node a tried 4 times, accepted 3 times (one step each: a single root child)
    for ok in (True, True, True, False):
        est.update([a], [-1], [0] if ok else [])
    # a's prior is Beta(0.5, 1.5) (strength m = 2 around the top prior mean 0.25): levels that
    # hold the same 4 trials do not count them again
    posterior_a = (3 + 2.0 * 0.25) / (4 + 2.0)
    assert est.estimate([a])[0] == pytest.approx(posterior_a)
    # b has no data of its own: it takes what the rest of its source bucket says (a's trials)
    assert est.estimate([b])[0] == pytest.approx(posterior_a)
    est.reset()
    assert est.estimate([a])[0] == pytest.approx(0.25)


def test_a_bucket_is_pulled_towards_its_siblings() -> None:
    est = AcceptanceEstimator(prior_mean=0.5, prior_strength=2.0, backoff_strength=4.0)
    rank0, rank1 = (2, 1, 0, 0), (2, 1, 1, 0)  # two children of the root, ranks 0 and 1
    for _ in range(8):  # rank 0 is accepted every time, rank 1 never
        est.update([rank0, rank1], [-1, -1], [0])
    # rank 1's prior is the rest of (source 2, depth 1): rank 0's 8 / 8 under Beta(2, 2)
    sibling = (8 + 4 * 0.5) / (8 + 4)
    assert est.estimate([rank1])[0] == pytest.approx((0 + 4 * sibling) / (8 + 4))
    other = (0 + 4 * 0.5) / (8 + 4)
    assert est.estimate([rank0])[0] == pytest.approx((8 + 4 * other) / (8 + 4))
    # an unseen rank sits between the two, and an unseen source at the global rate
    unseen_rank = est.estimate([(2, 1, 4, 0)])[0]
    assert est.estimate([rank1])[0] < unseen_rank < est.estimate([rank0])[0]
    top = (8 + 1) / (16 + 2)
    assert est.estimate([(7, 1, 0, 0)])[0] == pytest.approx(top)


def test_rejected_parent_teaches_nothing_about_children() -> None:
    est = AcceptanceEstimator()
    features = [(1, 1, 0, 0), (1, 2, 0, 0)]
    est.update(features, [-1, 0], [])  # the root's child was rejected: its child is no trial
    assert est.counts[-1][()] == [0.0, 1.0]
    assert (1, 2) not in est.counts[2]


def test_exploration_is_optimistic_and_capped() -> None:
    est = AcceptanceEstimator(prior_mean=0.3)
    f = (0, 1, NO_VALUE, NO_VALUE)
    plain, bold = est.estimate([f])[0], est.estimate([f], explore=1.0)[0]
    assert plain < bold <= 1.0
    assert est.estimate([f], explore=100.0)[0] == 1.0


def test_bad_priors_are_rejected() -> None:
    with pytest.raises(ValueError, match="prior_mean"):
        AcceptanceEstimator(prior_mean=1.0)
    with pytest.raises(ValueError, match="strength"):
        AcceptanceEstimator(backoff_strength=0.0)


def test_survival_multiplies_along_paths() -> None:
    assert survival([-1, 0, 1, -1], [0.5, 0.5, 0.8, 0.9]) == pytest.approx([0.5, 0.25, 0.2, 0.9])


def test_drafter_probabilities_are_recalibrated_per_source_and_depth() -> None:
    """Over-confident drafter probabilities are scaled down by their (source, depth) record."""
    est = AcceptanceEstimator(backoff_strength=4.0)
    node = (1, 3, 0, -1)  # retrieval, depth 3
    assert est.posterior(node, prior=0.9)[0] == pytest.approx(0.9)  # nothing learnt yet
    # 20 trials in other buckets of (retrieval, depth 3), each predicted 0.9, half accepted
    others = [(1, 3, r, s) for r in (1, 2) for s in (-2, -3)]
    features = [others[i % 4] for i in range(20)]
    est.count(features, [(i, i % 2 == 0) for i in range(20)], [0.9] * 20)
    expected = 0.9 * (10 + 4.0) / (18 + 4.0)
    assert est.calibrated_prior(node, 0.9) == pytest.approx(expected)
    assert est.posterior(node, prior=0.9)[0] == pytest.approx(expected)  # finest bucket empty
    assert est.posterior((1, 4, 0, -1), prior=0.9)[0] == pytest.approx(0.9)  # other depth
    assert est.posterior((2, 3, 0, -1), prior=0.9)[0] == pytest.approx(0.9)  # other source
    est.reset()
    assert est.calibrated_prior(node, 0.9) == pytest.approx(0.9)
