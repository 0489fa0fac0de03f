"""OmegaConf resolvers used by ``conf/``: hardware-dependent defaults.

``hardware: ${device_kind:${model.device}}`` in ``conf/config.yaml`` is ``cpu`` or ``gpu``;
method YAMLs size their drafts with ``${draft_size:<cpu value>,<gpu value>}``, which asks the
scheduler group's settings object (:mod:`racer_bench.engine.schedule.settings`) for its
``draft_sizing``: the hardware under ``scheduler=fixed``, always ``gpu`` under
``scheduler=confidence`` (its candidates are cut per step by the scheduler). Why: a draft tree
costs almost nothing extra on a GPU (the papers' 64 nodes), but on a CPU the forward pass grows
with the number of tree tokens (docs/benchmarks.md: a 64-token forward costs ~4x a 1-token
one), so CPU-sized drafts are smaller (how each CPU value was chosen: its method YAML).
Override ``hardware=gpu`` to get the papers' sizes anywhere.
"""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from racer_bench.engine.schedule.settings import settings_of
from racer_bench.errors import ConfigError

HARDWARE = ("cpu", "gpu")


def device_kind(device: str) -> str:
    """``cpu`` or ``gpu`` for a model ``device`` setting (``auto`` asks torch)."""
    device = str(device)
    if device == "auto":
        import torch

        return "gpu" if torch.cuda.is_available() else "cpu"
    return "cpu" if device.startswith("cpu") else "gpu"


def by_hardware(hardware: str, cpu_value: Any, gpu_value: Any, key: str = "hardware") -> Any:
    """``cpu_value`` on a CPU, ``gpu_value`` on an accelerator."""
    if hardware not in HARDWARE:
        raise ConfigError(f"{key}={hardware}: allowed values are {', '.join(HARDWARE)}")
    return cpu_value if hardware == "cpu" else gpu_value


def draft_size(cpu_value: Any, gpu_value: Any, *, _root_: Any) -> Any:
    """The draft size for the scheduler's ``draft_sizing`` (``hardware`` without a scheduler).

    A run config from before the scheduler group existed has no ``scheduler`` key; its sizes
    follow ``hardware`` as they did then.
    """
    hardware = OmegaConf.select(_root_, "hardware", default="cpu")
    settings = settings_of(OmegaConf.select(_root_, "scheduler", default=None), hardware)
    return by_hardware(settings.draft_sizing, cpu_value, gpu_value, key="scheduler.draft_sizing")


def register() -> None:
    """Register the resolvers once; every entry point that composes ``conf/`` calls it."""
    resolvers = (("device_kind", device_kind), ("by_hardware", by_hardware),
                 ("draft_size", draft_size))  # fmt: skip
    for name, fn in resolvers:
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn)
