"""``conf/sitting.yaml``: one sitting of a table as a Hydra job (read by
:mod:`racer_bench.sittings.job`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from racer_bench.config.paths import PathsConfig
from racer_bench.config.schema import NonNegativeFloat, NonNegativeInt


@dataclass
class SittingConfig:
    """Which table, which sitting, where its folders go and what every cell adds."""

    paths: PathsConfig = field(default_factory=PathsConfig)
    table: str | None = None  # required: an experiment of conf/experiment or a reproduce table
    sitting: NonNegativeInt = 0
    out: str = "results/reproduce"
    gap_s: NonNegativeFloat = 0.0
    cell_overrides: list[str] = field(default_factory=list)
    cells: list[str] | None = None
