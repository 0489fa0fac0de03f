"""``conf/config.yaml``: the schema of a run's top-level keys and of the groups below them
(:class:`RunConfig`), and the values of the run-level ``engine`` key (:data:`Engine`, which the
target and the model-based drafters also take)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from racer_bench.config.backend import BackendConfig
from racer_bench.config.logger import LoggerConfig
from racer_bench.config.paths import PathsConfig
from racer_bench.config.schema import Instantiable, NonNegativeInt, PositiveInt, Seed

# which forward runs the target (racer_bench.engine.target): auto picks by measurement
Engine = Literal["auto", "eager", "fast"]


@dataclass
class RunConfig:
    """Schema of ``conf/config.yaml``: the run-level keys and the groups below them.

    Groups with ``_target_`` (model, method, verifier, task, scheduler) are described by their
    targets' signatures (:mod:`racer_bench.config.schema`); a new top-level key or group is
    declared here. What the signatures cannot say (a scheduler's profile spec, a task's
    categories) :func:`racer_bench.run.config.validate` checks next.
    """

    seed: Seed = 0
    max_new_tokens: PositiveInt = 256
    warmup_prompts: NonNegativeInt = 1
    repeats: PositiveInt = 1
    baseline: Literal["same_run", "none"] = "same_run"
    # none | generate | llamacpp, or a list of them: reference=[generate,llamacpp]
    reference: Literal["none", "generate", "llamacpp"] | list[Literal["generate", "llamacpp"]] = (
        "none"
    )
    resume: str | None = None
    max_draft: NonNegativeInt = 256
    num_threads: PositiveInt | None = None
    adapt_threads: bool = True
    hardware: Literal["cpu", "gpu"] = "cpu"
    engine: Engine = "auto"
    experiment_name: str = "adhoc"
    tags: list[str] = field(default_factory=list)
    # an experiment sweeping tasks: each task's prompts by its display name, read by its own
    # task.limit (conf/experiment/llamacpp_ours.yaml: HumanEval 15, Spec-Bench 13)
    task_limits: dict[str, PositiveInt] = field(default_factory=dict)
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
