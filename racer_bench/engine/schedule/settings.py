"""What ``conf/scheduler`` sets: one settings object per YAML, the only reader of its keys.

A settings object is what the group's ``_target_`` builds, and each of its keys has one use:

* ``draft_sizing`` (``cpu`` | ``gpu``): which of a method's two draft defaults the method YAMLs
  take; their ``${draft_size:<cpu>,<gpu>}`` resolver (:mod:`racer_bench.run.resolvers`) asks it.
* ``profile``, ``profile_reps``, ``profile_context``: how the runner gets the target's cost
  curve (:meth:`ConfidenceSettings.profile_settings`, then :meth:`ProfileSettings.resolve`).
* the rest: the scheduler's own options; :meth:`make` builds one fresh scheduler per mode.

``tests/unit/test_scheduler_settings.py`` changes each key of each ``conf/scheduler`` YAML and
fails unless exactly one of these three answers changes (none: a key accepted and ignored).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, Protocol

from racer_bench.config import legacy
from racer_bench.config.schema import RESERVED_KEYS, PositiveInt
from racer_bench.engine.schedule.cost import (
    DEFAULT_CONTEXT,
    CostProfile,
    check_spec,
    resolve_profile,
)
from racer_bench.engine.schedule.scheduler import (
    ConfidenceOptions,
    ConfidenceScheduler,
    FixedScheduler,
    Scheduler,
)
from racer_bench.errors import ConfigError

DraftSizing = Literal["cpu", "gpu"]


@dataclass(frozen=True)
class ProfileSettings:
    """Where the cost curve comes from: a ``scheduler.profile`` spec and how ``auto`` measures."""

    spec: str
    reps: int
    context: int

    def resolve(self, target: Any, cache_dir: Path | str, max_size: int) -> CostProfile:
        """The curve up to ``max_size`` (``auto``: cached, or measured now on ``target``)."""
        return resolve_profile(self.spec, target, cache_dir, max_size, self.reps,
                               context=self.context)  # fmt: skip


class SchedulerSettings(Protocol):
    """The scheduler group: draft sizing, cost-profile settings and a scheduler factory."""

    draft_sizing: DraftSizing

    def profile_settings(self) -> ProfileSettings | None:
        """How to get the cost curve, or None when the scheduler needs none."""

    def make(self, profile: CostProfile | None) -> Scheduler:
        """A fresh scheduler (each mode keeps its own statistics)."""


@dataclass(frozen=True)
class FixedSettings:
    """``conf/scheduler/fixed.yaml``: verify every node, drafts sized for ``draft_sizing``."""

    draft_sizing: DraftSizing = "cpu"

    def profile_settings(self) -> None:
        return None

    def make(self, profile: CostProfile | None = None) -> Scheduler:
        return FixedScheduler()


@dataclass(frozen=True)
class ConfidenceSettings(ConfidenceOptions):
    """``conf/scheduler/confidence.yaml``: the :class:`ConfidenceOptions`, the draft sizing of
    its candidates and the cost-profile settings (``profile`` is a spec, see
    :func:`racer_bench.engine.schedule.cost.resolve_profile`)."""

    draft_sizing: DraftSizing = "gpu"
    profile: str = "auto"
    profile_reps: PositiveInt = 5
    profile_context: PositiveInt = DEFAULT_CONTEXT

    def __post_init__(self) -> None:
        check_spec(self.profile)

    def profile_settings(self) -> ProfileSettings:
        return ProfileSettings(str(self.profile), self.profile_reps, self.profile_context)

    def options(self) -> ConfidenceOptions:
        """The keys the scheduler itself reads."""
        return ConfidenceOptions(**{f.name: getattr(self, f.name)
                                    for f in fields(ConfidenceOptions)})  # fmt: skip

    def make(self, profile: CostProfile | None) -> Scheduler:
        if profile is None:
            raise ConfigError("scheduler=confidence: needs a cost profile (scheduler.profile)")
        return ConfidenceScheduler(profile, self.options())


ROUTING_KEYS = ("hardware", "backend")  # what AutoSettings picks by; no scheduler reads them


@dataclass(frozen=True)
class AutoSettings(ConfidenceSettings):
    """``conf/scheduler/auto.yaml``, the default: :meth:`pick` gives the confidence settings for
    our own loop on a CPU, where a draft's best size depends on the machine, and
    :class:`FixedSettings` at the hardware's sizes on an accelerator or inside vLLM (which
    verifies chains of its own length)."""

    hardware: DraftSizing = "cpu"
    backend: str = "native"

    def pick(self) -> SchedulerSettings:
        """The settings that run (:func:`settings_of` returns these, never an AutoSettings)."""
        confidence = {f.name: getattr(self, f.name) for f in fields(ConfidenceSettings)}
        if self.hardware == "cpu" and self.backend == "native":
            return ConfidenceSettings(**confidence)
        moved = [k for k, v in confidence.items() if getattr(ConfidenceSettings(), k) != v]
        if moved:  # a confidence key changed where it would be ignored
            where = f"hardware={self.hardware}, backend={self.backend}"
            raise ConfigError(f"scheduler.{moved[0]}: read only where scheduler=auto picks the "
                              f"confidence scheduler (CPU, backend=native); with {where} name "
                              "scheduler=confidence")  # fmt: skip
        return FixedSettings(draft_sizing=self.hardware)


def upgrade(cfg: Any) -> None:
    """Point a saved run config's scheduler at its settings class (in place), so a run started
    before the settings objects existed can be resumed."""
    node = cfg.get("scheduler")
    target = str(node.get("_target_")) if node else ""
    if node and legacy.today(target) != target:
        node["_target_"] = legacy.today(target)
        node.pop("_partial_", None)


def settings_of(node: Mapping[str, Any] | None, hardware: str = "cpu") -> SchedulerSettings:
    """The settings object of a ``scheduler`` config node (its interpolations resolved).

    A config without one (run configs from before the group existed) gets the fixed scheduler
    with drafts sized for its ``hardware``, as they were then.
    """
    if not node or "_target_" not in node:
        return FixedSettings(draft_sizing=hardware)  # type: ignore[arg-type]
    from hydra.utils import get_object

    kind: Any = get_object(legacy.today(str(node["_target_"])))
    keys = {str(k): node[k] for k in node if str(k) not in RESERVED_KEYS}
    try:
        settings = kind(**keys)
    except TypeError as error:  # a key the settings do not declare
        raise ConfigError(f"scheduler: {error}") from None
    return settings.pick() if isinstance(settings, AutoSettings) else settings
