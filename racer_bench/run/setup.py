"""Building a run from its composed config: the target at the engine and dtype chosen, the
task, the modes (AR baseline, method, strict greedy for lossy verifiers) and the scheduler's
cost curve."""

from __future__ import annotations

import gc
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from racer_bench.config.construct import construct, task_max_new_tokens
from racer_bench.engine.decode import LoopOptions
from racer_bench.engine.drafter import Drafter, NullDrafter, runs_on
from racer_bench.engine.fast import engine_choice
from racer_bench.engine.fast.floor import floor_record
from racer_bench.engine.schedule.cost import CostProfile
from racer_bench.engine.schedule.scheduler import FixedScheduler, Scheduler
from racer_bench.engine.schedule.settings import SchedulerSettings
from racer_bench.engine.target import HFTarget
from racer_bench.engine.verify import Verifier
from racer_bench.engine.verify.greedy import GreedyVerifier
from racer_bench.errors import ConfigError
from racer_bench.models.loaders import resolve_device
from racer_bench.run.config import scheduler_settings
from racer_bench.run.reference import GENERATE, Reference, build_references, reference_names
from racer_bench.run.startup import Startup
from racer_bench.tasks.base import Task

PROFILE_FILE = "cost_profile.json"


@dataclass
class Mode:
    """One way of generating: a drafter with a verifier (``baseline``, ``method``, ``strict``)."""

    name: str
    drafter: Drafter
    verifier: Verifier
    scheduler: Scheduler = field(default_factory=FixedScheduler)


@dataclass
class Setup:
    """Everything instantiated once per run."""

    cfg: DictConfig
    target: HFTarget
    task: Task
    modes: list[Mode]
    options: LoopOptions
    max_new_tokens: int
    profile: CostProfile | None = None  # the scheduler's cost curve, saved in the run folder
    engine_choice: dict[str, Any] = field(default_factory=dict)  # requested, chosen, why
    # measured curves per torch thread count, once the governor changed the threads
    profiles: dict[int, CostProfile] = field(default_factory=dict)  # by thread count
    start_profiles: dict[str, CostProfile] = field(default_factory=dict)  # by mode, at the start
    # reference=generate: the eager target transformers' generate() is timed on (else None)
    reference: HFTarget | None = None
    # the other references asked for (reference=llamacpp), timed in the same rotation
    references: list[Reference] = field(default_factory=list)
    # the weight-read floor of an AR step on this machine (None off a CPU)
    floor: dict[str, Any] | None = None
    startup: Startup = field(default_factory=Startup)  # seconds per phase before the prompts


def build(cfg: DictConfig) -> Setup:
    """Instantiate target, task, drafters and verifiers from the composed config, timing each
    phase (:class:`~racer_bench.run.startup.Startup`).

    ``cfg`` has been checked by the entry point that builds the run
    (:func:`racer_bench.run.config.validate`, once per run), task keys included.
    """
    startup = Startup()
    startup.begin()
    if cfg.num_threads:
        torch.set_num_threads(int(cfg.num_threads))
    with startup.phase("task"):
        task: Task = construct(cfg.task, "task")
    with startup.phase("model"):
        target, engine_choice = choose_engine(cfg)
    with startup.phase("method"):
        verifier: Verifier = construct(cfg.verifier, "verifier")
        drafter = construct(cfg.method, "method", vocab_size=target.vocab_size)
        check_native(drafter, cfg)
    with startup.phase("cost_profile"):
        settings = scheduler_settings(cfg)
        profile = cost_profile(settings, cfg, target, drafter)
    method = Mode("method", drafter, verifier, settings.make(profile))
    modes = [method]
    if cfg.baseline == "same_run":
        modes.insert(0, Mode("baseline", NullDrafter(), verifier))
    if not verifier.lossless:  # lossy verifiers are judged against strict greedy, same drafter
        with startup.phase("method"):
            strict_drafter = construct(cfg.method, "method", vocab_size=target.vocab_size)
        modes.append(Mode("strict", strict_drafter, GreedyVerifier(), settings.make(profile)))
    max_new = task_max_new_tokens(task, cfg.max_new_tokens)
    with startup.phase("reference_model"):
        reference = reference_target(cfg, target)
        references = build_references(cfg, target)
    gc.collect()
    gc.freeze()  # model objects never die: keep full collections from pausing decode steps
    options = LoopOptions(max_draft=cfg.max_draft)
    on_cpu = target.device.type == "cpu"
    with startup.phase("floor"):
        floor = floor_record(target.model) if on_cpu else None
    return Setup(cfg, target, task, modes, options, max_new, profile, engine_choice,
                 reference=reference, references=references, floor=floor,
                 startup=startup)  # fmt: skip


def reference_target(cfg: DictConfig, target: HFTarget) -> HFTarget | None:
    """The target ``generate()`` runs on with ``reference=generate``: the run's own when it
    runs the eager engine, else a second copy as transformers ships it (None without one)."""
    if GENERATE not in reference_names(cfg):
        return None
    if target.engine == "eager":
        return target
    return construct(model_at(cfg, str(target.dtype).removeprefix("torch.")), "model")


def model_at(cfg: DictConfig, dtype: str) -> DictConfig:
    """The model node with ``dtype`` in place of its own (``auto`` resolved by the choice)."""
    node = OmegaConf.create(OmegaConf.to_container(cfg.model, resolve=True))
    if "dtype" in node:
        node.dtype = dtype
    return node


def choose_engine(cfg: DictConfig) -> tuple[HFTarget, dict[str, Any]]:
    """The target at the configured engine and dtype, and what was asked, what runs and why.

    ``engine=auto`` and ``model.dtype=auto`` time and probe every allowed (engine, dtype) pair on
    first use on this machine and model and keep the fastest exact one
    (:mod:`racer_bench.engine.fast.engine_choice`); the timings go into the manifest.
    """
    engine = str(cfg.get("engine", "auto"))
    dtype = str(cfg.model.get("dtype", "auto"))
    device = str(resolve_device(str(cfg.model.get("device", "auto"))))

    def build(chosen: str) -> HFTarget:
        return construct(model_at(cfg, chosen), "model")

    return engine_choice.choose(build, engine, dtype, cfg.paths.cache_dir, model_key(cfg), device)


def model_key(cfg: DictConfig) -> str:
    """A file-name-safe key for the model node: its name and a hash of its other settings."""
    node = OmegaConf.to_container(cfg.model, resolve=True)
    assert isinstance(node, dict)
    name = str(node.get("name") or node.get("path") or node["_target_"].rsplit(".", 1)[-1])
    rest = {k: v for k, v in node.items() if k != "dtype"}
    digest = hashlib.sha256(json.dumps(rest, sort_keys=True, default=str).encode()).hexdigest()
    return f"{name}-{digest[:8]}"


def check_native(drafter: Drafter, cfg: DictConfig) -> None:
    """Refuse a method that runs only inside another engine (vLLM's own proposers)."""
    if not runs_on(drafter, "native"):
        method = cfg.method.get("method", type(drafter).__name__)
        raise ConfigError(f"method: vLLM's own proposer ({method}) runs only with backend=vllm")


def cost_profile(
    settings: SchedulerSettings, cfg: DictConfig, target: HFTarget, drafter: Drafter
) -> CostProfile | None:
    """The scheduler's cost curve up to the largest forward the drafter can make (or None)."""
    wanted = settings.profile_settings()
    if wanted is None:
        return None
    return wanted.resolve(target, cfg.paths.cache_dir, largest_forward(drafter, cfg.max_draft))


def largest_forward(drafter: Drafter, max_draft: int) -> int:
    """The most tokens one verification forward of ``drafter`` holds: its draft (its capacity,
    at most ``max_draft``), the root and any aux branch."""
    largest = min(int(getattr(drafter, "capacity", max_draft)), max_draft)
    return largest + 1 + int(getattr(drafter, "aux_capacity", 0))
