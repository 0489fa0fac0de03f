"""The run-level configuration: the schema of ``conf/config.yaml`` (:class:`RunConfig`) and
:func:`validate`, which checks every key before anything loads (both backends call it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from omegaconf import DictConfig

from racer_bench.analysis.tracking import LoggerConfig
from racer_bench.config.backend import BackendConfig
from racer_bench.config.paths import PathsConfig
from racer_bench.config.schema import Instantiable, NonNegativeInt, PositiveInt, Seed, check
from racer_bench.engine.schedule.settings import SchedulerSettings, settings_of
from racer_bench.engine.target import Engine


@dataclass
class RunConfig:
    """Schema of ``conf/config.yaml``: the run-level keys and the groups below them.

    Groups with ``_target_`` (model, method, verifier, task) are described by their targets'
    signatures (:mod:`racer_bench.config.schema`); a new top-level key or group is declared here.
    """

    seed: Seed = 0
    max_new_tokens: PositiveInt = 256
    warmup_prompts: NonNegativeInt = 1
    repeats: PositiveInt = 1
    baseline: Literal["same_run", "none"] = "same_run"
    reference: Literal["none", "generate"] = "none"
    resume: str | None = None
    max_draft: NonNegativeInt = 256
    num_threads: PositiveInt | None = None
    adapt_threads: bool = True
    hardware: Literal["cpu", "gpu"] = "cpu"
    engine: Engine = "auto"
    experiment_name: str = "adhoc"
    tags: list[str] = field(default_factory=list)
    model: Instantiable = field(default_factory=dict)
    method: Instantiable = field(default_factory=dict)
    verifier: Instantiable = field(default_factory=dict)
    task: Instantiable = field(default_factory=dict)
    scheduler: Instantiable = field(default_factory=dict)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    backend: BackendConfig = field(default_factory=BackendConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    # conf/experiment/racer_ablation.yaml: the variant and the method keys of each variant
    ablation: str | None = None
    ablations: dict[str, dict[str, Any]] = field(default_factory=dict)


def validate(cfg: DictConfig) -> None:
    """Check every key against :class:`RunConfig` before anything loads (one-line ConfigError)."""
    check(cfg, RunConfig)
    scheduler_settings(cfg)  # checks what the schema cannot (a profile spec)


def scheduler_settings(cfg: DictConfig) -> SchedulerSettings:
    """The scheduler group's settings (fixed, sized by ``hardware``, for configs without one)."""
    return settings_of(cfg.get("scheduler"), cfg.get("hardware", "cpu"))
