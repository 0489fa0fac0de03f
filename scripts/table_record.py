"""A docs/bench record of tables made cell by cell: ``<out>.json`` and ``<out>.md``.

    python -m racer_bench.reproduce llamacpp_ours llamacpp_inside --runs-only
    python scripts/table_record.py results/reproduce/llamacpp_ours \
        results/reproduce/llamacpp_inside docs/bench/llamacpp_table

Reads every finished cell (``<table>/<cell>/summary.json`` and its manifest) of the given
table folders: per cell its task, backend and method, the baseline's and the method's tok/s,
the speedup over that baseline with its 95% interval, MAT and the outputs equal to the baseline's;
with ``reference=llamacpp`` also llama.cpp's tok/s and its outputs equal to our AR's. Refuses
cells made from a dirty tree, by two commits or on two machines.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from racer_bench.record import folder as records

KEPT = ("baseline_tokens_per_s", "tokens_per_s", "speedup", "speedup_ci95", "mat", "identical",
        "n_prompts", "llamacpp_tokens_per_s", "llamacpp_identical", "ar_vs_llamacpp")  # fmt: skip


def cell(run: Path) -> tuple[dict[str, Any], tuple[Any, Any, Any]]:
    """One cell's block and its (commit, dirty, machine)."""
    summary = records.read_json(run / records.SUMMARY_FILE)
    manifest = records.read_json(run / records.MANIFEST_FILE)
    choices = manifest.get("choices") or {}
    block = {"table": run.parent.name, "task": choices.get("task"),
             "backend": choices.get("backend", "native"), "method": choices.get("method"),
             **{k: summary.get(k) for k in KEPT}}  # fmt: skip
    load = summary.get("load") or {}
    block["alone"] = load.get("alone")
    state = (manifest.get("git_sha"), manifest.get("git_dirty"),
             (manifest.get("hardware") or {}).get("id"))  # fmt: skip
    return block, state


def record(tables: list[Path], command: str) -> dict[str, Any]:
    cells, states, fingerprint = {}, set(), None
    for table in tables:
        for run in sorted(p for p in table.iterdir() if (p / records.SUMMARY_FILE).exists()):
            cells[f"{table.name}/{run.name}"], state = cell(run)
            states.add(state)
            fingerprint = fingerprint or records.read_json(run / records.MANIFEST_FILE)["hardware"]
    if len(states) != 1:
        raise SystemExit(f"error: cells from {len(states)} code states or machines: {states}")
    ((sha, dirty, _),) = states
    if dirty:
        raise SystemExit("error: cells made from a dirty tree; remake them from a commit")
    return {"command": command, "hardware": fingerprint, "git_sha": sha, "git_dirty": dirty,
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
    lines = [title, f"command: `{data['command']}` (commit {data['git_sha'][:7]}, clean: True)",
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
    out.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
    out.with_suffix(".md").write_text(page)
    print(page)


if __name__ == "__main__":
    main()
