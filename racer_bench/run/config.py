"""Checking a run's configuration before anything loads: :func:`validate` (each entry point that
builds a run calls it once: :func:`racer_bench.run.runner.run`, the verifier grid's
:func:`racer_bench.run.grid.build_grid` for each point, the vLLM backend) and the scheduler
group's settings (:func:`scheduler_settings`). The schema itself is
:class:`racer_bench.config.run.RunConfig`."""

from __future__ import annotations

from omegaconf import DictConfig

from racer_bench.config.construct import construct
from racer_bench.config.run import RunConfig
from racer_bench.config.schema import check
from racer_bench.engine.schedule.settings import SchedulerSettings, settings_of
from racer_bench.tasks.base import Task


def validate(cfg: DictConfig) -> None:
    """Check every key before the model loads; a bad one is a one-line ConfigError.

    First every key against :class:`RunConfig` (types and ranges), then what the schema cannot
    express: the scheduler's settings (a profile spec) and the task's keys that only its
    constructor and its prompts can judge (:meth:`racer_bench.tasks.base.Task.check`: a missing
    data file, an unknown category, a selection that keeps no prompt).
    """
    check(cfg, RunConfig)
    scheduler_settings(cfg)
    task: Task = construct(cfg.task, "task")
    task.check()


def scheduler_settings(cfg: DictConfig) -> SchedulerSettings:
    """The scheduler group's settings (fixed, sized by ``hardware``, for configs without one)."""
    return settings_of(cfg.get("scheduler"), cfg.get("hardware", "cpu"))
