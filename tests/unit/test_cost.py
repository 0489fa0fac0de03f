"""Cost profiles: monotone curves, synthetic specs, measurement order, caching on the tiny model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from racer_bench.engine.schedule import cost
from racer_bench.errors import ConfigError


def test_profile_is_made_monotone_and_relative_to_one_token() -> None:
    profile = cost.CostProfile([1, 2, 4, 8], [2.0, 3.0, 2.5, 5.0])
    # monotone least-squares fit (3.0 and 2.5 pool to 2.75), divided by cost(1)
    assert profile.costs == pytest.approx([1.0, 1.375, 1.375, 2.5])
    assert profile(3) == pytest.approx(1.375)
    assert profile(6) == pytest.approx(1.9375)  # linear between grid points
    assert profile(12) == pytest.approx(3.625)  # the last slope (1.125 / 4) extended
    spike = cost.CostProfile([1, 2, 4, 8, 16], [1.0, 9.0, 1.2, 1.3, 2.0])
    assert spike(16) < 4.0  # one outlier does not lift every larger size to 9
    n = np.arange(1, 20, dtype=float)
    assert np.all(np.diff(profile.curve(n)) >= 0)


def test_profile_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError, match="ascend from 1"):
        cost.CostProfile([2, 4], [1.0, 2.0])
    with pytest.raises(ValueError, match="one cost per size"):
        cost.CostProfile([1, 2], [1.0])


def test_synthetic_curves() -> None:
    assert cost.synthetic("flat")(64) == 1.0
    assert cost.synthetic("flat")(200) == 1.0
    assert cost.synthetic("steep")(10) == pytest.approx(10.0)
    assert cost.synthetic("steep", max_size=4)(100) == pytest.approx(100.0)
    assert cost.synthetic("linear:0.05")(21) == pytest.approx(2.0)
    for bad in ("wobbly", "linear:", "linear:-1"):
        with pytest.raises(ConfigError, match=r"scheduler\.profile="):
            cost.synthetic(bad)
    cost.check_spec("auto")
    cost.check_spec("some/where.json")
    with pytest.raises(ConfigError):
        cost.check_spec("nope")


def test_grid_reaches_the_largest_forward() -> None:
    assert cost.grid(16) == [1, 2, 3, 4, 6, 8, 12, 16]
    assert cost.grid(64) == list(cost.BASE_GRID)
    assert cost.grid(81) == [*cost.BASE_GRID, 81]
    assert cost.grid(300) == [*cost.BASE_GRID, 128, 256, 300]
    assert cost.grid(1) == [1]


def test_tree_shape_is_topological() -> None:
    parents = cost.tree_shape(20)
    assert parents[:8] == [-1] * 8 and all(-1 <= p < i for i, p in enumerate(parents))
    assert cost.tree_shape(3) == [-1, -1, -1]


def test_measure_interleaves_sizes_and_takes_medians() -> None:
    calls: list[int] = []

    def fake(n: int) -> float:
        calls.append(n)
        noise = 5.0 if len(calls) == 7 else 0.0  # one outlier: the median ignores it
        return 1.0 + 0.1 * (n - 1) + noise

    profile = cost.measure_cost(fake, [4, 2], reps=3, warmup=1, progress=False)
    assert calls[:3] == [1, 2, 4] and calls[3:6] == [2, 4, 1]  # rotated every repetition
    assert len(calls) == 4 * 3
    assert profile.sizes == [1, 2, 4]
    assert profile.costs == pytest.approx([1.0, 1.1, 1.3])
    assert profile.meta["reps"] == 3 and len(profile.meta["raw_costs"]) == 3


def test_save_and_load_round_trip(tmp_path) -> None:
    profile = cost.CostProfile([1, 8], [1.0, 2.0], {"source": "x"})
    path = profile.save(tmp_path / "p.json")
    loaded = cost.CostProfile.load(path)
    assert loaded.sizes == [1, 8] and loaded.costs == [1.0, 2.0] and loaded.meta == {"source": "x"}
    resolved = cost.resolve_profile(str(path), None, tmp_path, 64)
    assert resolved(8) == 2.0 and resolved.meta["source"] == str(path)
    with pytest.raises(ConfigError, match="no such file"):
        cost.resolve_profile(str(tmp_path / "missing.json"), None, tmp_path, 64)


def test_auto_measures_once_then_reads_the_cache(tiny_target, tmp_path, monkeypatch) -> None:
    """Shape, caching and monotonicity on the tiny model (its timings mean nothing)."""
    profile = cost.resolve_profile("auto", tiny_target, tmp_path, 10, reps=1, progress=False)
    assert profile.sizes == [1, 2, 3, 4, 6, 8, 10]
    assert profile.costs[0] == 1.0 and np.all(np.diff(profile.costs) >= 0)
    key = cost.profile_key(tiny_target)
    assert key["model"] == "tiny_random" and key["dtype"] == "float64"
    assert key["engine"] == "eager" and key["threads"] >= 1
    path = cost.cache_path(tmp_path, key)
    assert path.exists() and profile.meta["source"] == str(path)
    assert json.loads(path.read_text())["meta"]["key"] == key
    assert tiny_target.length == cost.DEFAULT_CONTEXT  # the prefix is all that stays cached

    def no_measuring(*args, **kwargs):
        raise AssertionError("the cached profile should have been used")

    monkeypatch.setattr(cost, "measure_target", no_measuring)
    monkeypatch.setattr(cost, "still_holds", lambda profile, timer: {"held": True})
    again = cost.resolve_profile("auto", tiny_target, tmp_path, 8, reps=1, progress=False)
    assert again.costs == profile.costs
    with pytest.raises(AssertionError, match="cached profile"):  # too short: measured again
        cost.resolve_profile("auto", tiny_target, tmp_path, 20, reps=1, progress=False)


def linear_timer(slope: float):
    """Seconds of an n-token forward on a machine where each extra token costs ``slope``."""
    return lambda n: 0.01 * (1.0 + slope * (n - 1))


def test_the_spot_check_holds_a_curve_within_its_tolerance_and_no_further() -> None:
    measured = cost.measure_cost(linear_timer(0.1), cost.grid(32), reps=1, progress=False)
    assert measured(16) == pytest.approx(2.5)
    check = cost.still_holds(measured, linear_timer(0.1))
    assert check == {"size": 16, "cached_cost": 2.5, "fresh_cost": 2.5, "held": True}
    assert cost.still_holds(measured, linear_timer(0.12))["held"]  # 2.8 / 2.5: within 1.25x
    assert not cost.still_holds(measured, linear_timer(0.2))["held"]  # 4.0 / 2.5
    assert not cost.still_holds(measured, linear_timer(0.05))["held"]  # 1.75 / 2.5
    short = cost.measure_cost(linear_timer(0.1), [1, 2, 4], reps=1, progress=False)
    assert cost.still_holds(short, linear_timer(0.1))["size"] == 4  # its largest size


def test_a_cached_curve_that_fails_the_spot_check_is_measured_again(
    tiny_target, tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr(cost, "target_timer", lambda target, prefix_len: linear_timer(0.1))
    path = cost.cache_path(tmp_path, cost.profile_key(tiny_target))
    disturbed = cost.measure_cost(linear_timer(0.15), cost.grid(32), reps=1, progress=False)
    disturbed.save(path)  # 16 tokens at 3.25 forwards where the machine now gives 2.5
    profile = cost.resolve_profile("auto", tiny_target, tmp_path, 32, reps=1, progress=False)
    assert profile(16) == pytest.approx(2.5) and profile.meta["source"] == str(path)
    assert profile.meta["replaced"]["cached_cost"] == pytest.approx(3.25)
    assert not profile.meta["replaced"]["held"]
    assert cost.CostProfile.load(path)(16) == pytest.approx(2.5)  # the cache now holds it
    kept = cost.resolve_profile("auto", tiny_target, tmp_path, 32, reps=1, progress=False)
    assert kept.meta["check"]["held"] and "replaced" not in kept.meta


def test_a_small_run_never_shrinks_the_cached_curve(tiny_target, tmp_path, monkeypatch) -> None:
    """An AR contender needs one size; re-measuring after a failed check keeps every size."""
    monkeypatch.setattr(cost, "target_timer", lambda target, prefix_len: linear_timer(0.1))
    path = cost.cache_path(tmp_path, cost.profile_key(tiny_target))
    cost.measure_cost(linear_timer(0.3), cost.grid(32), reps=1, progress=False).save(path)
    profile = cost.resolve_profile("auto", tiny_target, tmp_path, 1, reps=1, progress=False)
    assert profile.max_size == 32 and cost.CostProfile.load(path).max_size == 32
    assert profile(16) == pytest.approx(2.5) and not profile.meta["replaced"]["held"]


def test_cache_key_separates_engines(tiny_target, tmp_path) -> None:
    key = cost.profile_key(tiny_target)
    fast = cost.cache_path(tmp_path, key | {"engine": "fast"})
    assert fast != cost.cache_path(tmp_path, key)
    assert fast.parent == tmp_path / cost.PROFILE_DIR and "fast" in fast.name


def test_a_saved_profile_loads_back_bit_for_bit(tmp_path) -> None:
    """Pooled (non-monotone) timings are smoothed once; loading does not smooth them again."""
    profile = cost.CostProfile([1, 2, 3, 4, 6], [0.7, 1.0103, 1.0101, 1.31, 1.3])
    assert np.all(np.diff(profile.costs) >= 0) and profile.costs[0] == 1.0
    loaded = cost.CostProfile.load(profile.save(tmp_path / "p.json"))
    assert loaded.costs == profile.costs
