"""The cost curves a run keeps in its folder beside ``cost_profile.json``: the curves of other
thread counts the governor ran on, and the followed curves (``scheduler.follow_cost``): where
the machine moved the profile during the run, per mode, also in the summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from racer_bench.run.setup import Setup

SHOWN_SIZES = (2, 4, 8, 16, 32)  # the summary's cost(N) beside the profile's


def save_followed(setup: Setup, run_dir: Path) -> dict[str, Any]:
    """``cost_followed_<mode>.json`` for every mode whose scheduler followed the machine, and
    for the summary: per mode, forwards timed and cost(N) followed against the profile's."""
    out: dict[str, Any] = {}
    for mode in setup.modes:
        follower = getattr(mode.scheduler, "follower", None)
        if follower is None or not follower.observed:
            continue
        followed, base = follower.profile, follower.base
        followed.save(run_dir / f"cost_followed_{mode.name}.json")
        sizes = [n for n in SHOWN_SIZES if n <= base.max_size]
        out[mode.name] = {
            "forwards": follower.observed,
            "shaped": followed is not base,
            "cost": {n: round(followed(n), 3) for n in sizes},
            "profile_cost": {n: round(base(n), 3) for n in sizes},
        }
    return out


def save_thread_profiles(setup: Setup, run_dir: Path) -> None:
    """``cost_profile_t<n>.json`` for each curve measured after the first (:data:`PROFILE_FILE`)."""
    for threads, profile in setup.profiles.items():
        if profile is not setup.profile:
            profile.save(run_dir / f"cost_profile_t{threads}.json")
