"""``conf/logger``: the experiment tracker's keys (read by :mod:`racer_bench.analysis.tracking`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

LoggerMode = Literal["auto", "online", "offline", "disabled"]
MODES: tuple[str, ...] = get_args(LoggerMode)


@dataclass
class LoggerConfig:
    """Schema of ``conf/logger/*.yaml`` (the keys :func:`racer_bench.analysis.tracking.start`
    and :func:`racer_bench.analysis.tracking.init_kwargs` read)."""

    mode: LoggerMode = "disabled"
    project: str = "racer_bench"
    entity: str | None = None
    group: str | None = None
    job_type: str | None = None
    name: str | None = None
    tags: list[str] = field(default_factory=list)
    dir: str | None = None
    log_prompts: bool = True
    log_figures: bool = True
