"""Where a number was measured: a hardware fingerprint and the machine's load during a run.

``fingerprint()`` describes the machine and the software stack that set the speed of a run
(CPU model and ISA, cores, memory, torch and its BLAS / OpenMP / oneDNN); its ``id`` is a short
hash of the parts that change speed, so two records with the same id are comparable, and its
``label`` is what tables print. ``LoadMeter`` measures, over an interval, how busy the machine
was with other work: a shared machine silently halves speedups, so a run that was not alone
says so. Everything here reads /proc and degrades to ``None`` fields where it is absent.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import time
from pathlib import Path
from typing import Any

# cpuinfo flag -> key in the fingerprint's ``flags`` dict
ISA_FLAGS = {
    "avx2": "avx2",
    "fma": "fma",
    "avx512f": "avx512f",
    "avx512_bf16": "avx512_bf16",
    "avx512_vnni": "avx512_vnni",
    "amx_tile": "amx_tile",
    "amx_bf16": "amx_bf16",
}

# Share of the machine's CPU used by other processes above which a run is "not alone". On the
# 2-core machines this project runs on, one busy neighbour thread is 0.5; 0.15 leaves room for
# daemons and the shell (a few percent) while catching anything that takes a sizeable part of
# a core, which on a 2-thread run is enough to move tok/s by more than run-to-run noise (~5%).
OTHERS_SHARE_LIMIT = 0.15
# Steal time (hypervisor gave our vCPU to another guest) above this share also means not alone.
STEAL_SHARE_LIMIT = 0.05

PROC = Path("/proc")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


# ---------------------------------------------------------------- pure parsers


def parse_cpuinfo(text: str | None) -> dict[str, Any]:
    """Model name, vendor and flag set of the first processor in /proc/cpuinfo text."""
    out: dict[str, Any] = {"cpu_model": None, "vendor": None, "flags": set()}
    if not text:
        return out
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            if out["cpu_model"] is not None and not line.strip():
                break  # end of the first processor block
            continue
        key, value = key.strip().lower(), value.strip()
        if key in ("model name", "cpu model") and out["cpu_model"] is None:
            out["cpu_model"] = value
        elif key in ("vendor_id", "cpu implementer") and out["vendor"] is None:
            out["vendor"] = value
        elif key in ("flags", "features") and not out["flags"]:
            out["flags"] = set(value.split())
    return out


def isa_flags(flags: set[str]) -> dict[str, bool]:
    """The ISA flags that matter for CPU inference speed."""
    return {key: flag in flags for flag, key in ISA_FLAGS.items()}


def isa_summary(flags: dict[str, bool]) -> str:
    """The widest matrix ISA: ``amx``, ``avx512``, ``avx2`` or ``baseline``."""
    if flags.get("amx_tile"):
        return "amx"
    if flags.get("avx512f"):
        return "avx512"
    if flags.get("avx2"):
        return "avx2"
    return "baseline"


def parse_meminfo_gib(text: str | None) -> float | None:
    """MemTotal of /proc/meminfo text in GiB."""
    match = re.search(r"^MemTotal:\s+(\d+)\s*kB", text or "", re.MULTILINE)
    return round(int(match.group(1)) / 2**20, 1) if match else None


def parse_proc_stat(text: str | None) -> dict[str, int] | None:
    """The ``cpu`` line of /proc/stat: ``total``, ``idle`` (idle+iowait), ``steal`` jiffies."""
    for line in (text or "").splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            values = [int(v) for v in parts[1:]]
            values += [0] * (8 - len(values))
            # user nice system idle iowait irq softirq steal [guest guest_nice: already in user]
            total = sum(values[:8])
            return {"total": total, "idle": values[3] + values[4], "steal": values[7]}
    return None


def parse_loadavg(text: str | None) -> list[float] | None:
    """The 1, 5 and 15 minute load averages of /proc/loadavg text."""
    try:
        return [float(v) for v in (text or "").split()[:3]] or None
    except ValueError:
        return None


def parse_torch_config(show: str, parallel: str) -> dict[str, Any]:
    """BLAS, LAPACK, OpenMP, MKL, oneDNN and CPU capability from torch's build/parallel info."""

    def find(pattern: str, text: str) -> str | None:
        match = re.search(pattern, text)
        return match.group(1).strip() if match else None

    return {
        "blas": find(r"BLAS_INFO=([^,\s]+)", show),
        "lapack": find(r"LAPACK_INFO=([^,\s]+)", show),
        "openmp": find(r"(OpenMP \d+)", show + parallel),
        "mkl": find(r"Math Kernel Library Version ([^\s-]+)", show),
        "onednn": find(r"MKL-DNN (v[\d.]+)", show),
        "cpu_capability": find(r"CPU capability usage: (\S+)", show),
        "parallel_backend": find(r"ATen parallel backend: (\S+)", parallel),
    }


def fingerprint_id(fp: dict[str, Any]) -> str:
    """Short stable hash of the parts of a fingerprint that change speed."""
    parts = {
        "cpu_model": fp.get("cpu_model"),
        "isa": fp.get("isa"),
        "usable_cpus": fp.get("usable_cpus"),
        "memory_gib": round(fp["memory_gib"]) if fp.get("memory_gib") else None,
        "torch": fp.get("torch"),
        "blas": (fp.get("blas_info") or {}).get("blas"),
        "gpu": fp.get("gpu"),
    }
    blob = json.dumps(parts, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:10]


def fingerprint_label(fp: dict[str, Any]) -> str:
    """Human label for tables: ``AMD EPYC 7B13, avx2, 2 cores`` (GPU name first when on one)."""
    cpus = fp.get("usable_cpus") or fp.get("logical_cpus")
    cpu = f"{fp.get('cpu_model') or platform.machine() or 'cpu'}, {fp.get('isa')}, {cpus} cores"
    return f"{fp['gpu']} on {cpu}" if fp.get("gpu") else cpu


# ---------------------------------------------------------------- the machine


def usable_cpus() -> int | None:
    """CPUs this process may run on (affinity), else the logical CPU count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def _torch_info() -> dict[str, Any]:
    try:
        import torch
    except ImportError:
        return {"torch": None, "threads_default": None, "blas_info": {}, "gpu": None}
    try:
        info = parse_torch_config(torch.__config__.show(), torch.__config__.parallel_info())
    except Exception:  # build info is best effort
        info = {}
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "torch": torch.__version__,
        "threads_default": torch.get_num_threads(),
        "blas_info": info,
        "gpu": gpu,
    }


def _numpy_version() -> str | None:
    try:
        import numpy
    except ImportError:
        return None
    return numpy.__version__


def fingerprint(threads: int | None = None) -> dict[str, Any]:
    """The machine and stack that set a run's speed, with a stable ``id`` and a ``label``."""
    cpu = parse_cpuinfo(_read(PROC / "cpuinfo"))
    flags = isa_flags(cpu["flags"])
    torch_info = _torch_info()
    fp: dict[str, Any] = {
        "cpu_model": cpu["cpu_model"] or platform.processor() or None,
        "vendor": cpu["vendor"],
        "flags": flags,
        "isa": isa_summary(flags),
        "machine": platform.machine(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": usable_cpus(),
        "threads": threads if threads is not None else torch_info["threads_default"],
        "memory_gib": parse_meminfo_gib(_read(PROC / "meminfo")),
        "torch": torch_info["torch"],
        "blas_info": torch_info["blas_info"],
        "numpy": _numpy_version(),
        "gpu": torch_info["gpu"],
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    fp["id"] = fingerprint_id(fp)
    fp["label"] = fingerprint_label(fp)
    return fp


# ---------------------------------------------------------------- load during a run


def load_share(
    before: dict[str, int] | None,
    after: dict[str, int] | None,
    process_cpu_s: float,
    wall_s: float,
    cpus: int | None,
    hz: int = 100,
) -> dict[str, float | None]:
    """Steal share and other processes' share of the machine between two /proc/stat samples.

    ``others_share`` = (busy jiffies of the machine - this process's CPU time) / (wall x cpus):
    0 when this process was alone, 0.5 on a 2-CPU machine with one busy neighbour.
    """
    if not before or not after or not cpus or wall_s <= 0:
        return {"steal_share": None, "others_share": None}
    total = after["total"] - before["total"]
    idle = after["idle"] - before["idle"]
    steal = after["steal"] - before["steal"]
    if total <= 0:
        return {"steal_share": None, "others_share": None}
    busy_s = (total - idle - steal) / hz
    others = max(0.0, busy_s - process_cpu_s) / (wall_s * cpus)
    return {"steal_share": round(steal / total, 4), "others_share": round(min(others, 1.0), 4)}


def load_warning(load: dict[str, Any]) -> str | None:
    """One line saying why a run was not alone, or None when it was (or nothing was measured)."""
    reasons = []
    others, steal = load.get("others_share"), load.get("steal_share")
    if others is not None and others > OTHERS_SHARE_LIMIT:
        reasons.append(f"other processes used {others:.0%} of the machine's CPU")
    if steal is not None and steal > STEAL_SHARE_LIMIT:
        reasons.append(f"the hypervisor stole {steal:.0%} of CPU time")
    # a prompt the governor gave fewer threads saw busy cores, even where the run's average
    # share of other work stayed under the limit
    fewer = {int(k): v for k, v in (load.get("threads_per_prompt") or {}).items()
             if int(k) < load.get("threads_requested", 0)}  # fmt: skip
    if fewer:
        counts = ", ".join(f"{v} on {k}" for k, v in sorted(fewer.items()))
        reasons.append(f"prompts ran on fewer threads than the {load['threads_requested']} "
                       f"requested to leave the busy cores alone ({counts})")  # fmt: skip
    if not reasons:
        return None
    return "machine not alone during the run: " + "; ".join(reasons) + " (speeds may be low)"


def _clock_ticks() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, ValueError, OSError):
        return 100


class TreeClock:
    """CPU seconds of this process and every descendant seen so far: a descendant's last
    reading stays counted after it exits (an engine shut down between two batch sizes), so
    call it while the descendants live (:meth:`LoadMeter.sample`)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[int, float], float] = {}

    def __call__(self) -> float:
        try:
            import psutil
        except ImportError:
            return time.process_time()
        me = psutil.Process()
        for proc in [me, *me.children(recursive=True)]:
            try:
                with proc.oneshot():
                    key, times = (proc.pid, proc.create_time()), proc.cpu_times()
            except psutil.Error:  # exited between listing and reading
                continue
            self._seen[key] = times.user + times.system
        return sum(self._seen.values())


class LoadMeter:
    """Load of the machine between ``start()`` and ``stop()``: is this run alone on it?

    ``include_children`` counts the CPU of this process's descendants as the run's own (an
    engine that works in processes of its own, as vLLM does); call :meth:`sample` before a
    descendant exits, or its CPU time counts as another process's.
    """

    def __init__(self, include_children: bool = False) -> None:
        self._cpu = TreeClock() if include_children else time.process_time
        self._t0: float | None = None
        self._cpu0 = 0.0
        self._stat0: dict[str, int] | None = None
        self._load0: list[float] | None = None

    def start(self) -> LoadMeter:
        self._load0 = parse_loadavg(_read(PROC / "loadavg"))
        self._stat0 = parse_proc_stat(_read(PROC / "stat"))
        self._cpu0 = self._cpu()
        self._t0 = time.perf_counter()
        return self

    def sample(self) -> None:
        """Read the descendants' CPU time now (before some of them exit)."""
        self._cpu()

    def stop(self, steps: int | None = None) -> dict[str, Any]:
        """Load averages, steal and others' CPU share, this process's CPU/wall, ``alone``.

        May be called again: each call measures from ``start()`` (a partial table's load).
        """
        if self._t0 is None:
            raise RuntimeError("LoadMeter.stop() before start()")
        wall = time.perf_counter() - self._t0
        cpu = self._cpu() - self._cpu0
        stat1 = parse_proc_stat(_read(PROC / "stat"))
        shares = load_share(self._stat0, stat1, cpu, wall, usable_cpus(), _clock_ticks())
        out: dict[str, Any] = {
            "loadavg_start": self._load0,
            "loadavg_end": parse_loadavg(_read(PROC / "loadavg")),
            **shares,
            "wall_s": round(wall, 4),
            "process_cpu_s": round(cpu, 4),
            "cpu_per_wall": round(cpu / wall, 4) if wall > 0 else None,
        }
        if steps:
            out["steps"] = steps
            out["wall_per_step_s"] = wall / steps
            out["cpu_per_step_s"] = cpu / steps
        out["measured"] = shares["others_share"] is not None
        out["warning"] = load_warning(out)
        out["alone"] = out["warning"] is None  # True where /proc is absent: see ``measured``
        return out


# ---------------------------------------------------------------- threads beside other work


def threads_left(requested: int, others_cores: float | None, cpus: int | None) -> int:
    """``requested`` threads, less the cores other processes kept busy (rounded), at least 1.

    ``others_cores`` is the CPU time other processes used per second of wall time (1.0 = one
    busy core); None (not measured) keeps ``requested``.
    """
    if others_cores is None or not cpus:
        return requested
    return max(1, min(requested, cpus - round(others_cores)))


class ThreadGovernor:
    """Sets torch's CPU threads before each prompt to the cores other processes left free.

    Two torch threads on two cores beside one busy neighbour oversubscribe the machine: every
    OpenMP region of a forward then waits for the thread that shares its core, so forwards run
    2-3x slower, and tree steps lose more than AR steps; one thread on the free core is not
    slowed at all (docs/benchmarks.md, ``scripts/bench_load.py``). Other processes' share is
    measured over the previous prompt (a short sample before the first), from /proc/stat minus
    this process's CPU time; without /proc the requested count is kept.
    """

    def __init__(self, requested: int, first_sample_s: float = 0.25) -> None:
        self.requested = requested
        self.first_sample_s = first_sample_s
        self.per_prompt: dict[int, int] = {}
        self._mark: tuple[float, float, dict[str, int] | None] | None = None

    def _now(self) -> tuple[float, float, dict[str, int] | None]:
        return time.perf_counter(), time.process_time(), parse_proc_stat(_read(PROC / "stat"))

    def others_cores(self) -> float | None:
        """Cores' worth of CPU other processes used since the last call (first: a sample)."""
        if self._mark is None:
            self._mark = self._now()
            time.sleep(self.first_sample_s)
        (t0, cpu0, stat0), (t1, cpu1, stat1) = self._mark, self._now()
        self._mark = (t1, cpu1, stat1)
        shares = load_share(stat0, stat1, cpu1 - cpu0, t1 - t0, usable_cpus(), _clock_ticks())
        others = shares["others_share"]
        return None if others is None else others * (usable_cpus() or 1)

    def before_prompt(self) -> int:
        """Set and return the threads for the next prompt."""
        import torch

        threads = threads_left(self.requested, self.others_cores(), usable_cpus())
        if threads != torch.get_num_threads():
            torch.set_num_threads(threads)
        self.per_prompt[threads] = self.per_prompt.get(threads, 0) + 1
        return threads

    def report(self) -> dict[str, Any]:
        """``threads_requested`` and how many prompts ran with each thread count."""
        counts = {str(k): v for k, v in sorted(self.per_prompt.items())}
        return {"threads_requested": self.requested, "threads_per_prompt": counts}
