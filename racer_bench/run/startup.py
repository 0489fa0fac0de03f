"""What a run costs before its first timed prompt, by phase.

A run's start-up is the interpreter and imports with Hydra's composition and the config checks
(``imports_and_config``: process start to :func:`racer_bench.run.setup.build`), then each phase
of the build (model with the engine choice, method, cost profile, reference model, floor, the
task's prompts), then the warm-up prompt. First use on a machine measures and caches the engine
choice, the cost curve, the read bandwidth and the kernels; a cached run pays only for loading.
The summary keeps the seconds (``startup``); the printout gives them one line
(:func:`racer_bench.analysis.report.startup_line`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

BEFORE_BUILD = "imports_and_config"


def process_age_s() -> float | None:
    """Seconds since this process started (None where psutil is missing or cannot tell)."""
    try:
        import psutil

        return max(time.time() - psutil.Process().create_time(), 0.0)
    except Exception:  # ImportError, psutil.Error, OSError: the age is a nicety, never fatal
        return None


@dataclass
class Startup:
    """Seconds per phase of this invocation's start, in the order they ran.

    ``ready_s``: process start to the warm-up prompt (None without a process clock);
    ``warmup_s``: the warm-up prompt(s), run by every mode, not recorded.
    """

    phases: dict[str, float] = field(default_factory=dict)
    ready_s: float | None = None
    warmup_s: float | None = None

    def begin(self) -> None:
        """Count the process's life so far as the phase before the build."""
        age = process_age_s()
        if age is not None:
            self.phases[BEFORE_BUILD] = age

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block into ``name`` (added up when a name recurs)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - start

    def ready(self) -> None:
        """The moment the run is ready for its first prompt."""
        self.ready_s = process_age_s()

    @contextmanager
    def warmup(self) -> Iterator[None]:
        start = time.perf_counter()
        yield
        self.warmup_s = time.perf_counter() - start

    def to_dict(self) -> dict[str, Any]:
        return {
            "ready_s": _rounded(self.ready_s),
            "warmup_s": _rounded(self.warmup_s),
            "phases": {name: round(s, 3) for name, s in self.phases.items()},
        }


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 3)
