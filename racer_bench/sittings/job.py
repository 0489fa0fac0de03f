"""One sitting as a Hydra job: the table's cells, one machine at a time, into ``s<i>/``."""

from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from racer_bench.config.paths import CONF_DIR
from racer_bench.config.schema import check
from racer_bench.config.sitting import SittingConfig
from racer_bench.errors import ConfigError, find_config_error
from racer_bench.reproduce import cells_of
from racer_bench.run import resolvers
from racer_bench.run.sitting import SittingCell, run_sitting

resolvers.register()
MACHINE_LOCK = "sitting.lock"  # under paths.cache_dir: one sitting per machine at a time


@contextmanager
def machine_lock(cache_dir: str) -> Iterator[None]:
    """Wait for, then hold, this machine's sitting lock: a launcher that starts sittings side
    by side (submitit_local) still times them one after another."""
    path = Path(os.path.expanduser(cache_dir)) / MACHINE_LOCK
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def sitting_cells(cfg: DictConfig) -> list[SittingCell]:
    """The table's cells (or ``cells``' subset) with ``cell_overrides`` added to each."""
    extra = tuple(str(o) for o in cfg.cell_overrides)
    cells = [SittingCell(c.name, (*c.overrides, *extra)) for c in cells_of(str(cfg.table))
             if cfg.cells is None or c.name in cfg.cells]  # fmt: skip
    grids = [c.name for c in cells_of(str(cfg.table)) if c.points]
    if grids:
        raise ConfigError(f"table={cfg.table}: an ASD grid table; its cells run through "
                          "scripts/asd_grid.py, not in sittings")  # fmt: skip
    if not cells:
        raise ConfigError(f"cells={list(cfg.cells)}: none is a cell of table={cfg.table}")
    return cells


def run_job(cfg: DictConfig) -> dict[str, Any]:
    """One sitting: wait ``gap_s`` after the first, take the machine, run every cell."""
    check(cfg, SittingConfig)
    if cfg.table is None:
        raise ConfigError("table: name the table to sit (an experiment of conf/experiment)")
    cells = sitting_cells(cfg)
    if int(cfg.sitting) > 0 and float(cfg.gap_s) > 0:
        time.sleep(float(cfg.gap_s))
    with machine_lock(str(cfg.paths.cache_dir)):
        return run_sitting(cells, Path(str(cfg.out)) / f"s{int(cfg.sitting)}")


@hydra.main(config_path=str(CONF_DIR), config_name="sitting", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> None:
    try:
        summaries = run_job(cfg)
    except Exception as error:
        config_error = find_config_error(error)
        if config_error is None:
            raise
        print(f"error: {config_error}", file=sys.stderr)
        sys.exit(2)
    for name, summary in summaries.items():
        print(f"s{cfg.sitting} {name}: {summary.get('speedup', float('nan')):.3f}x")


def main() -> None:
    _hydra_main()
