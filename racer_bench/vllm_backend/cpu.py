"""How the vLLM engines use a CPU: their OpenMP thread binding and their dtype.

**Threads.** vLLM 0.32's CPU workers take their cores from ``VLLM_CPU_OMP_THREADS_BIND``
(read by its ``OMPProcessManager`` when the multiprocessing executor starts a worker):

* ``auto`` (vLLM's default): one logical CPU per physical core of the worker's NUMA node, then
  the last ``VLLM_CPU_NUM_OF_RESERVED_CPU`` of them held back for the engine's other processes
  (default: one per worker on x86 and ARM). On a 2-core machine the model runs on one thread.
* a CPU list such as ``0-1`` (``|`` between the lists of several workers): used as given.
  ``VLLM_CPU_NUM_OF_RESERVED_CPU`` then reserves nothing (vLLM reads it only in ``auto``; set
  below its minimum it logs a warning), so nothing is held back.
* ``nobind``: no binding and no thread count from vLLM.

Our default, ``usable``, binds every core this process may run on (its affinity, one logical
CPU per physical core, as vLLM's ``auto`` and torch's default thread count do): the native loop
runs its model on all cores, with the Python driver on them too, and the two engines compare
only on equal cores. The cost: vLLM's engine-core process waits for each forward's result by
spinning on shared memory (``sched_yield``, for up to a second after its last read), so on a
machine without a spare core it shares one with an OpenMP thread; that is why vLLM holds a core
back. Whether every core beside that spinner beats one core fewer is a measurement: compare
``threads_bind=usable`` with ``threads_bind=auto`` (or ``reserved_cpus=1``) on the machine.
With ``usable``, ``reserved_cpus`` holds back that many cores ourselves (the last
ones), e.g. ``reserved_cpus=1`` to reproduce vLLM's own choice through an explicit list, and
``VLLM_CPU_NUM_OF_RESERVED_CPU`` is left unset. With ``auto`` or ``nobind``, ``reserved_cpus``
is handed to vLLM as that variable (None: vLLM's default).

**Dtype.** ``backend.dtype=auto`` runs the engines in the model config's explicit dtype, else
float32. Not the native loop's bfloat16: that choice is exact because our kernels compute each
token's row alone (:mod:`racer_bench.engine.fast.engine_choice`); vLLM's are not row-invariant, and
in bfloat16 its speculative outputs stop equalling its AR's (measured on an AVX512-BF16 EPYC,
HumanEval-8, PLD: 2/8 identical at batch 1, 17/24 at batch 4, against all in float32).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Iterable, Sequence
from pathlib import Path
from typing import Any

from racer_bench.errors import ConfigError

BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"
RESERVED_ENV = "VLLM_CPU_NUM_OF_RESERVED_CPU"
OURS = "usable"  # threads_bind value: every usable core, computed here
VLLM_DTYPES = ("float32", "bfloat16", "float16")
SYS_CPU = Path("/sys/devices/system/cpu")


def usable_cpu_ids() -> list[int]:
    """Logical CPUs this process may run on (its affinity; every CPU where there is none)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def core_of(cpu: int, root: Path = SYS_CPU) -> Hashable:
    """The physical core a logical CPU belongs to (package, core); the CPU itself if unknown."""
    topology = root / f"cpu{cpu}" / "topology"
    try:
        package = (topology / "physical_package_id").read_text().strip()
        core = (topology / "core_id").read_text().strip()
    except OSError:
        return ("cpu", cpu)
    return (package, core)


def one_per_core(cpus: Iterable[int], core: Callable[[int], Hashable] = core_of) -> list[int]:
    """The lowest logical CPU of each physical core among ``cpus``, in id order (two OpenMP
    threads on the SMT siblings of one core share its arithmetic units)."""
    first: dict[Hashable, int] = {}
    for cpu in sorted(cpus):
        first.setdefault(core(cpu), cpu)
    return sorted(first.values())


def id_list(cpus: Sequence[int]) -> str:
    """vLLM's CPU list syntax: runs of consecutive ids as ranges, e.g. ``0-3,6,8-9``."""
    parts: list[str] = []
    ids = sorted(cpus)
    start = 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or ids[i] != ids[i - 1] + 1:
            run = ids[start:i]
            parts.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
            start = i
    return ",".join(parts)


def bind_string(cpus: Sequence[int], workers: int = 1) -> str:
    """``cpus`` split into ``workers`` contiguous groups (the first ones one larger when they
    do not divide), ``|`` between groups: one list per vLLM CPU worker, as vLLM asks."""
    if not cpus:
        raise ConfigError("backend.threads_bind=usable: no CPU is left to bind (lower "
                          "backend.reserved_cpus)")  # fmt: skip
    if workers > len(cpus):
        raise ConfigError(f"backend.tensor_parallel_size={workers}: more CPU workers than the "
                          f"{len(cpus)} usable cores")  # fmt: skip
    size, extra = divmod(len(cpus), workers)
    groups, at = [], 0
    for w in range(workers):
        n = size + (w < extra)
        groups.append(id_list(cpus[at : at + n]))
        at += n
    return "|".join(groups)


def thread_binding(bind: str, reserved: int | None, cores: Sequence[int],
                   workers: int = 1) -> dict[str, Any]:  # fmt: skip
    """The engines' binding: ``env`` (the vLLM variables to set) and what it means (recorded).

    Args:
        bind: ``backend.threads_bind`` (``usable``, ``auto``, ``nobind`` or a CPU list).
        reserved: ``backend.reserved_cpus`` (None: 0 with ``usable``, else vLLM's default).
        cores: the usable cores, one logical CPU each (:func:`one_per_core`).
        workers: CPU workers per engine (``tensor_parallel_size``).
    """
    if bind != OURS:
        env = {BIND_ENV: bind} | ({} if reserved is None else {RESERVED_ENV: str(reserved)})
        return {"env": env, "threads_bind": bind, "reserved_cpus": reserved,
                "omp_threads": None, "usable_cores": len(cores)}  # fmt: skip
    held = reserved or 0
    kept = list(cores[: max(len(cores) - held, 0)])
    value = bind_string(kept, workers)
    return {"env": {BIND_ENV: value}, "threads_bind": value, "reserved_cpus": held,
            "omp_threads": len(kept), "usable_cores": len(cores)}  # fmt: skip


def choose_dtype(requested: str, model_dtype: str | None) -> tuple[str, str]:
    """(dtype of both CPU engines, why), as the module docstring says.

    Args:
        requested: ``backend.dtype`` (``auto`` or a dtype).
        model_dtype: the model config's dtype (``auto`` or None: not explicit).
    """
    if requested != "auto":
        return requested, f"backend.dtype={requested} was requested"
    if model_dtype in VLLM_DTYPES:
        return str(model_dtype), f"auto: model.dtype={model_dtype}"
    return "float32", "auto: float32, in which vLLM's speculative outputs equal its AR's"
