"""The cost follower: the profile corrected by timed forwards, shape only, fading, monotone."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from racer_bench.engine.schedule.cost import CostProfile, synthetic
from racer_bench.engine.schedule.follow import CostFollower, grid_shares
from racer_bench.engine.schedule.scheduler import ConfidenceOptions, ConfidenceScheduler, Plan
from racer_bench.engine.structs import Draft

SIZES = [1, 2, 4, 8, 16, 32]
MEASURED = {"key": {"model": "tiny"}}  # what measure_target writes; only such curves are followed
PROFILE = CostProfile(SIZES, [1.0, 1.1, 1.3, 1.8, 2.6, 4.0], MEASURED)  # in one machine state
OTHER_STATE = [1.0, 1.05, 1.15, 1.4, 1.9, 3.0]  # the machine now (AR dearer, trees not)


def feed(follower: CostFollower, costs: list[float], rounds: int, ar_seconds: float = 0.01):
    for _ in range(rounds):
        for size, cost in zip(SIZES, costs, strict=True):
            follower.observe(size, ar_seconds * cost)


def test_shares_interpolate_between_grid_sizes_and_sum_to_one() -> None:
    assert grid_shares(SIZES, 8).tolist() == [0, 0, 0, 1, 0, 0]
    assert grid_shares(SIZES, 12) == pytest.approx([0, 0, 0, 0.5, 0.5, 0])
    assert grid_shares(SIZES, 64).tolist() == [0, 0, 0, 0, 0, 1]
    for size in range(1, 40):
        assert grid_shares(SIZES, size).sum() == pytest.approx(1.0)


def test_the_followed_curve_becomes_the_machines_curve() -> None:
    follower = CostFollower(PROFILE)
    feed(follower, OTHER_STATE, rounds=20)
    assert follower.profile.costs == pytest.approx(OTHER_STATE, rel=1e-9)
    assert follower.profile.meta["source"] == "followed" and follower.observed == 120


def test_a_factor_common_to_every_size_changes_nothing() -> None:
    follower = CostFollower(PROFILE)
    feed(follower, PROFILE.costs, rounds=20, ar_seconds=0.037)  # a uniformly slower machine
    assert follower.profile.costs == pytest.approx(PROFILE.costs, rel=1e-9)


def test_without_two_measured_sizes_the_curve_is_the_profile() -> None:
    follower = CostFollower(PROFILE)
    assert follower.profile is PROFILE
    for _ in range(50):
        follower.observe(16, 0.5)  # only one size, however far off
    assert follower.profile is PROFILE


def test_unmeasured_sizes_take_the_nearest_measured_correction() -> None:
    follower = CostFollower(PROFILE)
    for _ in range(10):
        follower.observe(1, 0.01)
        follower.observe(8, 0.01 * 1.8 * 0.8)  # 8 tokens: 0.8 of the profile's cost
    costs = follower.profile.costs
    assert costs[SIZES.index(8)] == pytest.approx(1.8 * 0.8)
    assert costs[SIZES.index(32)] == pytest.approx(4.0 * 0.8)  # constant beyond: the 8's factor
    one_seventh = np.exp(np.log(0.8) / 7)  # size 2 lies 1/7 of the way from 1 to 8 (log factor)
    assert costs[1] == pytest.approx(1.1 * one_seventh)


def test_an_old_state_fades_and_the_new_one_takes_over() -> None:
    follower = CostFollower(PROFILE, half_life=16)
    feed(follower, PROFILE.costs, rounds=50)
    feed(follower, OTHER_STATE, rounds=40)  # 240 forwards: 15 half-lives
    assert follower.profile.costs == pytest.approx(OTHER_STATE, rel=1e-3)


def test_noisy_timings_never_make_a_bigger_forward_cheaper() -> None:
    rng = random.Random(0)
    follower = CostFollower(PROFILE, half_life=8)
    for _ in range(300):
        size = rng.choice(range(1, 40))
        follower.observe(size, 0.01 * PROFILE(size) * rng.uniform(0.3, 3.0))
        assert np.all(np.diff(follower.profile.costs) >= 0) and follower.profile.costs[0] == 1.0


def test_bad_timings_are_ignored() -> None:
    follower = CostFollower(PROFILE)
    for seconds in (0.0, -1.0, float("nan"), float("inf")):
        follower.observe(4, seconds)
    assert follower.observed == 0


def chain(n: int) -> Draft:
    scores = torch.full((n,), 0.8)
    return Draft(tokens=torch.arange(n), parents=torch.arange(n) - 1, score=scores,
                 score_is_probability=True)  # fmt: skip


@pytest.mark.parametrize("follow", [True, False])
def test_the_scheduler_keeps_more_where_the_machine_makes_trees_cheap(follow: bool) -> None:
    options = ConfidenceOptions(follow_cost=follow, follow_half_life=32)
    steep = synthetic("steep", 16)
    scheduler = ConfidenceScheduler(CostProfile(steep.sizes, steep.costs, MEASURED), options)
    before = len(scheduler.schedule(chain(12)).draft)
    for step in range(200):  # the machine: every forward costs about the same
        size = step % 12
        scheduler.learn(Plan(chain(size), size), [], seconds=0.01)
    plan = scheduler.schedule(chain(12))
    assert (len(plan.draft) > before) == follow
    assert (plan.cost < synthetic("steep", 16)(1 + len(plan.draft))) == follow


def test_a_new_profile_restarts_the_following() -> None:
    scheduler = ConfidenceScheduler(PROFILE, ConfidenceOptions(follow_cost=True))
    assert scheduler.follower is not None
    for _ in range(10):
        for size in (1, 8):
            scheduler.follower.observe(size, 0.01)
    assert scheduler.cost is not PROFILE
    other = CostProfile([1, 32], [1.0, 2.0], MEASURED)  # the governor's curve for another count
    scheduler.profile = other
    assert scheduler.cost is other and scheduler.follower.observed == 0


def test_synthetic_curves_and_curve_files_are_used_as_given() -> None:
    for given in (synthetic("linear:0.1", 16), CostProfile(SIZES, PROFILE.costs, {"source": "f"})):
        scheduler = ConfidenceScheduler(given, ConfidenceOptions(follow_cost=True))
        scheduler.learn(Plan(chain(3), 3), [], seconds=0.01)
        assert scheduler.follower is None and scheduler.cost is given
