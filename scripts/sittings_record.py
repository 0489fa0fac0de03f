"""A docs/bench record of a table made in sittings: ``<out>.json`` and ``<out>.md``.

    python -m racer_bench.reproduce follow_cost --sittings 3
    python scripts/sittings_record.py results/reproduce/follow_cost \
        docs/bench/follow_cost_humaneval15 --command "python -m racer_bench.reproduce ..."

Reads every sitting's cell summaries (``<table>/s<i>/<cell>/summary.json``) and manifests and
pools them with :mod:`racer_bench.analysis.rankings`: per sitting the AR baseline's tok/s and
step, whether the machine was alone, and per cell its speedup, tok/s, MAT, identical outputs
and (where the scheduler followed the machine) cost(16) followed / the profile's; then
the pooled rankings. Refuses sittings made from a dirty tree or by two commits.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from racer_bench.analysis import rankings
from racer_bench.bench.common import write_report
from racer_bench.record import folder as records


def cell_block(summary: dict[str, Any]) -> dict[str, Any]:
    """What the record keeps of one cell in one sitting."""
    followed = (summary.get("cost_followed") or {}).get("method") or {}
    return {
        "speedup": summary.get("speedup"),
        "speedup_ci95": summary.get("speedup_ci95"),
        "tokens_per_s": summary.get("tokens_per_s"),
        "mat": summary.get("mat"),
        "identical": summary.get("identical"),
        "draft_size_mean": summary.get("draft_size_mean"),
        "cost16_followed": (followed.get("cost") or {}).get("16"),
        "cost16_profile": (followed.get("profile_cost") or {}).get("16"),
    }


def sitting_block(folder: Path) -> tuple[dict[str, Any], set[tuple[Any, Any]], Any]:
    """One sitting: its machine state, its cells, the code states and the fingerprint seen."""
    cells, states, fingerprint, first = {}, set(), None, None
    for run in sorted(p for p in folder.iterdir() if (p / records.SUMMARY_FILE).exists()):
        summary = records.read_json(run / records.SUMMARY_FILE)
        manifest = records.read_json(run / records.MANIFEST_FILE)
        states.add((manifest.get("git_sha"), manifest.get("git_dirty")))
        fingerprint = fingerprint or manifest.get("hardware")
        first = first or summary
        cells[run.name] = cell_block(summary)
    if first is None:
        raise SystemExit(f"error: {folder}: no finished cell")
    load = first.get("load") or {}
    block = {"alone": load.get("alone"), "others_share": load.get("others_share"),
             "ar_tokens_per_s": first.get("baseline_tokens_per_s"),
             "ar_step_ms": first.get("ar_step_ms"), "wall_s": load.get("wall_s"),
             "cells": cells}  # fmt: skip
    return block, states, fingerprint


def record(table_dir: Path, command: str) -> dict[str, Any]:
    """The JSON record of the sittings in ``table_dir``."""
    sittings, states, fingerprint = {}, set(), None
    for folder in rankings.sitting_dirs(table_dir):
        sittings[folder.name], seen, found = sitting_block(folder)
        states |= seen
        fingerprint = fingerprint or found
    if len(states) != 1:
        raise SystemExit(f"error: {table_dir}: sittings from {len(states)} code states {states}")
    ((sha, dirty),) = states
    if dirty:
        raise SystemExit(f"error: {table_dir}: made from a dirty tree; remake from a commit")
    return {"command": command, "hardware": fingerprint, "git_sha": sha, "git_dirty": dirty,
            "sittings": sittings, "rankings": rankings.rankings(table_dir)}  # fmt: skip


def fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def markdown(data: dict[str, Any], title: str) -> str:
    """The record as a page: the setting, each sitting's state and cells, the rankings."""
    fp = data["hardware"] or {}
    lines = [title, f"command: `{data['command']}` (commit {data['git_sha'][:7]}, clean: True)",
             f"measured on {fp.get('label')} (hardware id {fp.get('id')})", ""]  # fmt: skip
    for name, s in data["sittings"].items():
        lines.append(f"- {name}: AR {fmt(s['ar_tokens_per_s'], '.1f')} tok/s, AR step "
                     f"{fmt(s['ar_step_ms'], '.2f')} ms, alone: {s['alone']} (others "
                     f"{fmt(s['others_share'], '.1%')}), {fmt(s['wall_s'], '.0f')} s")  # fmt: skip
    header = "| sitting | cell | speedup | tok/s | MAT | identical | nodes/step | cost(16) |"
    lines += ["", header, "|---|---|---:|---:|---:|---:|---:|---|"]
    for name, s in data["sittings"].items():
        for cell, c in s["cells"].items():
            cost = (f"{fmt(c['cost16_followed'], '.2f')} / {fmt(c['cost16_profile'], '.2f')}"
                    if c["cost16_followed"] is not None else "-")  # fmt: skip
            lines.append(f"| {name} | {cell} | {fmt(c['speedup'], '.3f')}x | "
                         f"{fmt(c['tokens_per_s'], '.1f')} | {fmt(c['mat'], '.2f')} | "
                         f"{fmt(c['identical'], '.0%')} | {fmt(c['draft_size_mean'], '.1f')} | "
                         f"{cost} |")  # fmt: skip
    return "\n".join([*lines, "", rankings.markdown(data["rankings"])]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("table_dir", type=Path, help="results/reproduce/<table>")
    parser.add_argument("out", type=Path, help="docs/bench/<name> (.json and .md are added)")
    parser.add_argument("--command", default=None, help="the command that made the sittings")
    parser.add_argument("--title", default=None, help="the page's first line")
    args = parser.parse_args()
    table = args.table_dir.name
    command = args.command or f"python -m racer_bench.reproduce {table} --sittings N"
    data = record(args.table_dir, command)
    title = args.title or f"{table} in {len(data['sittings'])} sittings"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    page = markdown(data, title)
    write_report(str(args.out), page.rstrip("\n"), data)
    print(page)


if __name__ == "__main__":
    main()
