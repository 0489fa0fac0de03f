"""One command per curated table: ``python -m racer_bench.reproduce racer_main``.

Runs every cell (job) behind a table from a clean committed tree on this machine, one
``python -m racer_bench`` process per cell, into ``results/reproduce/<table>/<cell>/``. Cells
already finished are kept, a cell stopped half way is resumed (``resume=``), so a table can be
made across sittings; a cell made on another machine (hardware fingerprint) is refused rather
than mixed into the table. Then the cells are curated into ``results/curated/<table>/`` (the
previous records move to ``results/archive/``), and every generated doc and figure index that
reads that folder is regenerated. Wall times go to ``<table>/reproduce.json`` and are printed.

A table is an experiment YAML (``conf/experiment/<table>.yaml``: its ``hydra.sweeper.params``
are the cells), one of :data:`SINGLE` (a fixed command line) or one of :data:`GRIDS` (an ASD
grid: one ``scripts/asd_grid.py`` process per drafter, its points in ``<drafter>/<i>/``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from racer_bench.analysis import records
from racer_bench.analysis.curation import curate
from racer_bench.analysis.tables.render import header_sources
from racer_bench.config.paths import CONF_DIR, REPO_ROOT
from racer_bench.system import hardware

# tables made by one command rather than an experiment's sweep: name -> overrides
SINGLE = {
    "readme_main": ("method=racer", "task=humaneval", "task.limit=15", "reference=generate"),
    # docs/scheduler.md: the confidence scheduler's reliability diagram and draft sizes
    "scheduler_racer_humaneval10": ("method=racer", "scheduler=confidence", "task=humaneval",
                                    "task.limit=10", "baseline=none"),
}  # fmt: skip


@dataclass(frozen=True)
class Grid:
    """An ASD grid table: every drafter against strict greedy at every ``budget:gate:cap``."""

    drafters: tuple[str, ...]
    overrides: tuple[str, ...]
    points: tuple[str, ...]


# ASD grids (docs/asd.md): strict greedy is decoded once per prompt for all points of a drafter.
# The model drafters' GSM8K grid (asd_grid_gsm8k_drafters) needs trained checkpoints
# (docs/model_drafters.md) and is made by the commands in docs/asd.md.
GRIDS = {
    "asd_grid_humaneval": Grid(("pld", "racer"), ("task=humaneval", "task.limit=20"),
                               ("1:0.1:1", "4:0.5:1", "8:0.25:2", "12:1:2")),
    "asd_grid_gsm8k": Grid(("pld", "racer"), ("task=gsm8k", "task.limit=30"),
                           ("4:0.5:1", "8:0.25:2", "12:1:2")),
}  # fmt: skip
# cell folder names: the values of these keys, in this order, joined by "_"
NAME_KEYS = ("method", "ablation", "task")


@dataclass(frozen=True)
class Cell:
    """One job of a table: its folder name and the overrides that make it; an ASD grid cell
    also has its ``points`` (one run folder each, ``<name>/<i>/``)."""

    name: str
    overrides: tuple[str, ...]
    points: tuple[str, ...] = ()

    def run_dirs(self, folder: Path) -> list[Path]:
        """The run folders this cell writes in its table's ``folder``."""
        if self.points:
            return [folder / self.name / str(i) for i in range(len(self.points))]
        return [folder / self.name]


def cells_of(table: str, conf_dir: Path = CONF_DIR) -> list[Cell]:
    """Every cell of ``table``: the cartesian product of its experiment's sweep (one cell for a
    table of :data:`SINGLE`, one per drafter of a :data:`GRIDS` table)."""
    if table in SINGLE:
        return [Cell(table, SINGLE[table])]
    if table in GRIDS:
        grid = GRIDS[table]
        return [Cell(d, (f"method={d}", *grid.overrides), grid.points) for d in grid.drafters]
    path = conf_dir / "experiment" / f"{table}.yaml"
    if not path.exists():
        experiments = (p.stem for p in (conf_dir / "experiment").glob("*.yaml"))
        known = sorted([*SINGLE, *GRIDS, *experiments])
        raise SystemExit(f"error: table {table!r} unknown; choose one of: {', '.join(known)}")
    params = OmegaConf.select(OmegaConf.load(path), "hydra.sweeper.params") or {}
    keys = list(params)
    values = [str(params[k]).split(",") for k in keys]
    out = []
    for combo in itertools.product(*values):
        chosen = dict(zip(keys, combo, strict=True))
        named = [chosen[k] for k in NAME_KEYS if k in chosen]
        named += [v for k, v in chosen.items() if k not in NAME_KEYS]
        swept = (f"{k}={v}" for k, v in chosen.items())
        overrides = (f"experiment={table}", "hydra.mode=RUN", *swept)
        out.append(Cell("_".join(named), overrides))
    return out


def state_of(run_dir: Path) -> str:
    """``done``, ``partial`` (a manifest, not finished) or ``new``."""
    if (run_dir / records.SUMMARY_FILE).exists() and not (
        run_dir / records.INCOMPLETE_FILE
    ).exists():
        return "done"
    return "partial" if (run_dir / records.MANIFEST_FILE).exists() else "new"


def cell_state(run_dirs: Sequence[Path]) -> str:
    """A cell's state over its run folders: ``done`` when all are, ``new`` when none started."""
    states = {state_of(d) for d in run_dirs}
    return states.pop() if len(states) == 1 and "partial" not in states else "partial"


def check_machine(run_dirs: Sequence[Path], machine_id: str) -> None:
    """Refuse cells whose manifest names another hardware fingerprint than this machine's."""
    for run_dir in run_dirs:
        if state_of(run_dir) == "new":
            continue
        made_on = (records.read_json(run_dir / records.MANIFEST_FILE).get("hardware") or {}).get(
            "id"
        )
        if made_on != machine_id:
            raise SystemExit(
                f"error: {run_dir} was made on machine {made_on}, this is {machine_id}; a table "
                "holds one machine: continue it there, or move that folder away to redo it here"
            )


def check_clean(repo: Path = REPO_ROOT) -> str:
    """The commit to reproduce from; refuses an uncommitted tree (its records could not be
    traced to code)."""
    state = records.git_state(repo)
    if state["git_sha"] is None:
        raise SystemExit("error: reproduce needs a git checkout (records name the commit)")
    if state["git_dirty"]:
        raise SystemExit("error: the tree has uncommitted changes; commit them (or stash) first")
    return str(state["git_sha"])


def command(cell: Cell, run_dir: Path) -> list[str]:
    """The ``python -m racer_bench`` line that makes (or continues) ``cell`` in ``run_dir``; for
    a grid cell the ``scripts/asd_grid.py`` line (which resumes its own points)."""
    if cell.points:
        script = str(REPO_ROOT / "scripts" / "asd_grid.py")
        return [sys.executable, script, *cell.overrides, "--out", str(run_dir),
                "--points", *cell.points]  # fmt: skip
    base = [sys.executable, "-m", "racer_bench"]
    if state_of(run_dir) == "partial":
        return [*base, f"resume={run_dir}"]
    return [*base, *cell.overrides, f"hydra.run.dir={run_dir}"]


def cell_env() -> dict[str, str]:
    """The environment of a cell's process: this checkout first on ``PYTHONPATH``, so a script
    cell (``scripts/asd_grid.py``, whose own folder heads ``sys.path``) runs this tree's code and
    records its commit, not that of wherever racer_bench happens to be installed from."""
    paths = [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def run_cells(table: str, out: Path, sha: str) -> dict[str, float]:
    """Make every cell not finished yet; returns this sitting's wall seconds per cell."""
    cells = cells_of(table)
    check_machine([d for c in cells for d in c.run_dirs(out / table)], hardware.fingerprint()["id"])
    walls: dict[str, float] = {}
    for i, cell in enumerate(cells, 1):
        run_dir = out / table / cell.name
        if cell_state(cell.run_dirs(out / table)) == "done":
            print(f"[{i}/{len(cells)}] {cell.name}: finished earlier, kept")
            continue
        argv = command(cell, run_dir)
        print(f"[{i}/{len(cells)}] {cell.name}: {' '.join(argv[2:])}", flush=True)
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=REPO_ROOT, env=cell_env())
        walls[cell.name] = time.perf_counter() - start
        record_walls(out / table, {cell.name: walls[cell.name]}, sha)
        if done.returncode != 0:
            raise SystemExit(f"error: cell {cell.name} failed (exit {done.returncode}); rerun "
                             "the same command to continue")  # fmt: skip
    return walls


def record_walls(folder: Path, walls: dict[str, float], sha: str) -> dict[str, object]:
    """Add this sitting's wall seconds per cell to ``folder/reproduce.json`` (cells summed over
    sittings) and return the record."""
    path = folder / "reproduce.json"
    record = json.loads(path.read_text()) if path.exists() else {"cells": {}, "commits": []}
    for name, seconds in walls.items():
        record["cells"][name] = record["cells"].get(name, 0.0) + seconds
    if sha not in record["commits"]:
        record["commits"].append(sha)
    record["wall_s"] = sum(record["cells"].values())
    record["hardware"] = hardware.fingerprint()["label"]
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")
    return record


def curate_table(table: str, out: Path, curated: Path, archive: Path) -> Path:
    """Copy the finished cells into ``curated/<table>/``; the folder they replace moves to
    ``archive/<table>_<date>/`` with a line in ``archive/README.md``."""
    dest = curated / table
    if dest.exists():
        old = archive / f"{table}_{time.strftime('%Y%m%d')}"
        tries = 1
        while old.exists():  # remade twice on one day: never move into the earlier copy
            tries += 1
            old = archive / f"{table}_{time.strftime('%Y%m%d')}_{tries}"
        shutil.move(str(dest), str(old))
        day = time.strftime("%Y-%m-%d")
        with (archive / "README.md").open("a", encoding="utf-8") as notes:
            notes.write(f"\n- `{old.name}/`: the {table} records replaced by "
                        f"`python -m racer_bench.reproduce {table}` on {day}.\n")  # fmt: skip
    for cell in cells_of(table):
        for run in cell.run_dirs(out / table):
            curate(run, dest if table in SINGLE else dest / run.relative_to(out / table))
    shutil.copy(out / table / "reproduce.json", dest / "reproduce.json")
    return dest


def regenerate_docs(folder: str) -> list[str]:
    """Rerun ``make_tables`` for every generated doc whose sources include ``folder`` and
    ``make_figures`` for every figure index entry drawn from it; returns what was rewritten."""
    written = []
    for doc in sorted((REPO_ROOT / "docs").glob("*.md")):
        sources = header_sources(doc.read_text(encoding="utf-8").split("\n", 1)[0])
        if sources and folder in sources:
            script = REPO_ROOT / "scripts" / "make_tables.py"
            where = str(doc.relative_to(REPO_ROOT))
            argv = [sys.executable, str(script), "--results", *sources, "--out", where]
            subprocess.run(argv, cwd=REPO_ROOT, check=True)
            written.append(str(doc.relative_to(REPO_ROOT)))
    index = REPO_ROOT / "docs" / "figures" / "generated.json"
    entries = json.loads(index.read_text()) if index.exists() else {}
    drawn: dict[tuple[str, ...], list[str]] = {}
    for name, entry in sorted(entries.items()):
        if folder in entry["results"]:
            drawn.setdefault(tuple(entry["results"]), []).append(name)
    for sources, names in drawn.items():  # only the figures indexed as drawn from them
        script = REPO_ROOT / "scripts" / "make_figures.py"
        argv = [sys.executable, str(script), "--results", *sources, "--out", "docs/figures",
                "--formats", "png", "--only", *names]  # fmt: skip
        subprocess.run(argv, cwd=REPO_ROOT, check=True)
        written.append(f"docs/figures/{{{','.join(names)}}} ({' '.join(sources)})")
    return written


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("tables", nargs="+", help="experiment names (conf/experiment) or "
                        f"{', '.join([*SINGLE, *GRIDS])}")  # fmt: skip
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "results" / "reproduce")
    parser.add_argument("--runs-only", action="store_true", help="make the cells; no curating")
    args = parser.parse_args(argv)
    for table in args.tables:
        cells_of(table)  # unknown names fail before anything runs
    sha = check_clean()
    for table in args.tables:
        start = time.perf_counter()
        run_cells(table, args.out, sha)
        record = json.loads((args.out / table / "reproduce.json").read_text())
        print(f"{table}: cells took {record['wall_s'] / 60:.1f} min in all "
              f"(this sitting {(time.perf_counter() - start) / 60:.1f} min)")  # fmt: skip
        if args.runs_only:
            continue
        curated = REPO_ROOT / "results" / "curated"
        dest = curate_table(table, args.out, curated, REPO_ROOT / "results" / "archive")
        for written in regenerate_docs(str(dest.relative_to(REPO_ROOT))):
            print(f"regenerated {written}")


if __name__ == "__main__":
    main()
