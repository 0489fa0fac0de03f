"""A docs/bench record of tables made cell by cell: ``<out>.json`` and ``<out>.md``.

    python -m racer_bench.reproduce llamacpp_ours llamacpp_inside --runs-only
    python scripts/table_record.py results/reproduce/llamacpp_ours \
        results/reproduce/llamacpp_inside docs/bench/llamacpp_table

Reads every finished cell (``<table>/<cell>/summary.json`` and its manifest) of the given
table folders: per cell its task, backend and method, the baseline's and the method's tok/s,
the speedup over that baseline with its 95% interval, MAT and the outputs equal to the baseline's;
with ``reference=llamacpp`` also llama.cpp's tok/s and its outputs equal to our AR's. Each cell
keeps its commit (a table remade in part names both); refuses cells made from a dirty tree or on
two machines.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from racer_bench.bench.common import write_report
from racer_bench.record import folder as records

KEPT = ("baseline_tokens_per_s", "tokens_per_s", "speedup", "speedup_ci95", "mat", "identical",
        "n_prompts", "llamacpp_tokens_per_s", "llamacpp_identical", "ar_vs_llamacpp")  # fmt: skip


def cell(run: Path) -> tuple[dict[str, Any], bool, dict[str, Any]]:
    """One cell's block (its commit included), whether its tree was dirty, and its machine."""
    summary = records.read_json(run / records.SUMMARY_FILE)
    manifest = records.read_json(run / records.MANIFEST_FILE)
    choices = manifest.get("choices") or {}
    block = {"table": run.parent.name, "task": choices.get("task"),
             "backend": choices.get("backend", "native"), "method": choices.get("method"),
             **{k: summary.get(k) for k in KEPT}}  # fmt: skip
    block["alone"] = (summary.get("load") or {}).get("alone")
    block["git_sha"] = manifest.get("git_sha")
    return block, bool(manifest.get("git_dirty")), manifest.get("hardware") or {}


def record(tables: list[Path], command: str) -> dict[str, Any]:
    """The JSON record of every finished cell of ``tables`` (each cell keeps its commit)."""
    cells, machines, fingerprint = {}, set(), None
    for table in tables:
        for run in sorted(p for p in table.iterdir() if (p / records.SUMMARY_FILE).exists()):
            name = f"{table.name}/{run.name}"
            cells[name], dirty, hardware = cell(run)
            if dirty:
                raise SystemExit(f"error: {name}: made from a dirty tree; remake it from a commit")
            machines.add(hardware.get("id"))
            fingerprint = fingerprint or hardware
    if len(machines) != 1:
        raise SystemExit(f"error: cells from {len(machines)} machines ({machines}); one per table")
    commits = sorted({c["git_sha"] for c in cells.values()})
    return {"command": command, "hardware": fingerprint, "git_shas": commits, "git_dirty": False,
            "cells": cells}  # fmt: skip


def fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def row(c: dict[str, Any]) -> str:
    """A cell's line of the table."""
    lo, hi = c.get("speedup_ci95") or [None, None]
    n = c.get("n_prompts") or 0
    same = "-" if c["identical"] is None else f"{round(c['identical'] * n)}/{n}"
    ref = "-"
    if c.get("llamacpp_tokens_per_s") is not None:
        ref = f"{c['llamacpp_tokens_per_s']:.1f} ({round(c['llamacpp_identical'] * n)}/{n})"
    speed = f"{fmt(c['speedup'], '.2f')}x ({fmt(lo, '.2f')}-{fmt(hi, '.2f')})"
    cells = [c["task"], c["backend"], c["method"], fmt(c["baseline_tokens_per_s"], ".1f"),
             fmt(c["tokens_per_s"], ".1f"), speed, fmt(c["mat"], ".2f"), same, ref,
             str(c["alone"])]  # fmt: skip
    return "| " + " | ".join(map(str, cells)) + " |"


def markdown(data: dict[str, Any], title: str) -> str:
    fp = data["hardware"] or {}
    commits = ", ".join(sha[:7] for sha in data["git_shas"])
    lines = [title, f"command: `{data['command']}` (commits {commits}, each clean; a cell's own "
             "is in the .json)",
             f"measured on {fp.get('label')} (hardware id {fp.get('id')})", "",
             "| task | backend | method | AR tok/s | method tok/s | speedup (95% CI) | MAT | "
             "identical | llama.cpp AR tok/s (= our AR) | alone |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---|"]  # fmt: skip
    ordered = sorted(data["cells"].values(), key=lambda c: (c["task"], c["backend"], c["method"]))
    return "\n".join([*lines, *map(row, ordered)]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("paths", type=Path, nargs="+", help="table folders, then the output")
    parser.add_argument("--command", default=None, help="the command that made the cells")
    parser.add_argument("--title", default=None, help="the page's first line")
    args = parser.parse_args()
    *tables, out = args.paths
    if not tables:
        parser.error("give at least one table folder and the output")
    names = " ".join(t.name for t in tables)
    data = record(tables, args.command or f"python -m racer_bench.reproduce {names} --runs-only")
    page = markdown(data, args.title or f"{names}: every cell, one after another")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_report(str(out), page.rstrip("\n"), data)
    print(page)


if __name__ == "__main__":
    main()
