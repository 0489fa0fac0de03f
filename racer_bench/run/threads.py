"""Threads while a run goes on: torch's threads follow the cores other processes leave free,
prompt by prompt, and the schedulers get the cost curve measured for the count in use."""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig

from racer_bench.engine.schedule.scheduler import ConfidenceScheduler
from racer_bench.run.config import scheduler_settings
from racer_bench.run.setup import Setup, cost_profile, largest_forward
from racer_bench.system import hardware


def thread_governor(cfg: DictConfig) -> hardware.ThreadGovernor | None:
    """With ``adapt_threads`` (default), torch's threads follow the cores other processes
    leave free, prompt by prompt (:class:`racer_bench.system.hardware.ThreadGovernor`)."""
    if not cfg.get("adapt_threads", True):
        return None
    return hardware.ThreadGovernor(torch.get_num_threads())


def prompt_threads(governor: hardware.ThreadGovernor | None, setup: Setup) -> int:
    """The torch threads for the next prompt (the governor's choice, else today's count), with
    the schedulers' cost curve for that count (:func:`follow_threads`)."""
    threads = governor.before_prompt() if governor else torch.get_num_threads()
    follow_threads(setup, threads)
    return threads


def follow_threads(setup: Setup, threads: int) -> None:
    """Give the schedulers the measured cost curve of the thread count the next prompt runs on.

    A curve belongs to one thread count (SmolLM2-135M, fast engine: a 12-token forward costs
    1.6 AR forwards on two threads and 2.0 on one), so when the governor takes a core away the
    scheduler cuts trees for the machine it has now instead of the one it started on. Each
    count is measured once (cached on disk like the first curve), up to the largest forward of
    any scheduled mode; at the count the run started on, every mode keeps the curve it was
    built with (a sitting's contenders each have their own). A scheduler's curve is only set
    when it changes, so what it learnt about the machine (``scheduler.follow_cost``) stays.
    Synthetic curves and curves read from a file do not depend on threads and stay.
    """
    scheduled = [m for m in setup.modes if isinstance(m.scheduler, ConfidenceScheduler)]
    key = (setup.profile.meta.get("key") if setup.profile is not None else None) or {}
    if not scheduled or "threads" not in key:
        return
    start = int(key["threads"])
    setup.profiles.setdefault(start, setup.profile)  # type: ignore[arg-type]
    for mode in scheduled:
        setup.start_profiles.setdefault(mode.name, mode.scheduler.profile)  # type: ignore[attr-defined]
    if threads != start and threads not in setup.profiles:
        settings = scheduler_settings(setup.cfg)
        drafters = (m.drafter for m in scheduled)
        largest = max(drafters, key=lambda d: largest_forward(d, setup.cfg.max_draft))
        profile = cost_profile(settings, setup.cfg, setup.target, largest)
        assert profile is not None
        setup.profiles[threads] = profile
    for mode in scheduled:
        wanted = setup.start_profiles[mode.name] if threads == start else setup.profiles[threads]
        if mode.scheduler.profile is not wanted:  # type: ignore[attr-defined]
            mode.scheduler.profile = wanted  # type: ignore[attr-defined]


def run_load(
    meter: hardware.LoadMeter, steps: int, governor: hardware.ThreadGovernor | None
) -> dict[str, Any]:
    """The machine's load over the timed prompts, with the threads each prompt ran with."""
    load = meter.stop(steps)
    if governor:
        load |= governor.report()
        load["warning"] = hardware.load_warning(load)
        load["alone"] = load["warning"] is None
    return load
