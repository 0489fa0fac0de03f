"""Rankings that hold in a second sitting: a table's cells pooled over its sittings.

Each sitting (:mod:`racer_bench.run.sitting`) gives every cell a speedup with its
within-sitting 95% interval; sittings spaced in time give its between-sitting spread. A
table's noise floor comes from its own A/A cell (AR against the shared AR baseline, whose true
speedup is 1): the larger of the A/A's typical within-sitting half-interval and its
between-sitting half-range. Two cells whose pooled speedups differ by less than the floor, or
than either cell's own between-sitting half-range, are tied (``≈``); the same holds per
category, with the category's own A/A floor.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from racer_bench.analysis.tables.noise import AA_METHOD
from racer_bench.errors import ConfigError
from racer_bench.record import folder as records

SITTING_PREFIX = "s"  # sitting folders: s0/, s1/, ...
AA_PREFIX = AA_METHOD  # A/A cells: ar, ar_<task> (the A/A row's method names them)


def sitting_dirs(table_dir: Path) -> list[Path]:
    """The sitting folders of a table folder, in order."""
    found = [p for p in Path(table_dir).iterdir() if p.is_dir() and p.name[1:].isdigit()
             and p.name.startswith(SITTING_PREFIX)]  # fmt: skip
    return sorted(found, key=lambda p: int(p.name[1:]))


def load_sittings(table_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Cell name -> its summary in each sitting that finished it; refuses to pool sittings of
    two machine kinds (hardware fingerprint)."""
    cells: dict[str, list[dict[str, Any]]] = {}
    machines: set[str] = set()
    for sitting in sitting_dirs(table_dir):
        for run in sorted(p for p in sitting.iterdir() if (p / records.SUMMARY_FILE).exists()):
            summary = records.read_json(run / records.SUMMARY_FILE)
            machines.add(str((summary.get("hardware") or {}).get("id")))
            cells.setdefault(run.name, []).append(summary)
    if len(machines) > 1:
        raise ConfigError(f"{table_dir}: sittings from {len(machines)} machine kinds "
                          f"({', '.join(sorted(machines))}); pool one kind per table")  # fmt: skip
    return cells


def spread(blocks: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Pooled speedup (mean over sittings), each sitting's, its within-sitting half-interval
    (median over sittings) and its between-sitting half-range."""
    speedups = [float(b["speedup"]) for b in blocks]
    halves = [(b["speedup_ci95"][1] - b["speedup_ci95"][0]) / 2 for b in blocks
              if b.get("speedup_ci95")]  # fmt: skip
    between = (max(speedups) - min(speedups)) / 2 if len(speedups) > 1 else None
    within = statistics.median(halves) if halves else None
    return {"speedup": statistics.fmean(speedups), "sittings": speedups, "within": within,
            "between": between}  # fmt: skip


def floor_of(aa: dict[str, Any] | None) -> float | None:
    """The noise floor from an A/A block: the larger of its within and between spreads, and at
    least how far its pooled speedup sits from 1."""
    if aa is None:
        return None
    parts = [v for v in (aa["within"], aa["between"], abs(aa["speedup"] - 1.0)) if v is not None]
    return max(parts) if parts else None


def ordering(blocks: dict[str, dict[str, Any]], floor: float | None) -> list[list[str]]:
    """Cells from fastest to slowest; a cell joins its faster neighbour's tie group when their
    gap is under the floor or under either cell's own between-sitting half-range (a cell that
    moves more than the A/A from sitting to sitting cannot be ordered by the A/A alone)."""
    names = sorted(blocks, key=lambda n: -blocks[n]["speedup"])
    out: list[list[str]] = []
    for name in names:
        if out:
            prev = out[-1][-1]
            noise = max(floor or 0.0, blocks[prev].get("between") or 0.0,
                        blocks[name].get("between") or 0.0)  # fmt: skip
            if blocks[prev]["speedup"] - blocks[name]["speedup"] < noise:
                out[-1].append(name)
                continue
        out.append([name])
    return out


def group_rankings(cells: dict[str, list[dict[str, Any]]], view: str | None = None) -> dict:
    """Blocks, floor and ordering over every cell (``view``: a category of ``per_category``)."""

    def pick(summary: dict[str, Any]) -> dict[str, Any] | None:
        return summary if view is None else (summary.get("per_category") or {}).get(view)

    blocks = {}
    for name, summaries in cells.items():
        picked = [b for b in map(pick, summaries) if b and b.get("speedup") is not None]
        if picked:
            blocks[name] = spread(picked)
    aa = [n for n in blocks if n == AA_PREFIX or n.startswith(f"{AA_PREFIX}_")]
    floor = max((f for f in (floor_of(blocks[n]) for n in aa) if f is not None), default=None)
    contenders = {n: b for n, b in blocks.items() if n not in aa}
    return {"cells": blocks, "aa": aa, "floor": floor, "ordering": ordering(contenders, floor)}


def rankings(table_dir: Path) -> dict[str, Any]:
    """The table's rankings overall and per category (where every sitting has the category)."""
    cells = load_sittings(table_dir)
    categories = sorted({c for runs in cells.values() for s in runs
                         for c in (s.get("per_category") or {})})  # fmt: skip
    return {
        "sittings": len(sitting_dirs(table_dir)),
        "overall": group_rankings(cells),
        "per_category": {c: group_rankings(cells, c) for c in categories},
    }


def markdown(ranked: dict[str, Any]) -> str:
    """The overall ordering with each cell's pooled speedup, sittings and spreads."""
    overall = ranked["overall"]
    floor = overall["floor"]
    said = f"±{floor:.3f}" if floor is not None else "unknown (no A/A cell)"
    lines = [f"{ranked['sittings']} sittings; noise floor (A/A) {said}", "",
             "| cell | speedup | per sitting | within ± | between ± |",
             "|---|---:|---|---:|---:|"]  # fmt: skip
    for name, block in overall["cells"].items():
        each = ", ".join(f"{s:.2f}" for s in block["sittings"])
        within = "-" if block["within"] is None else f"{block['within']:.3f}"
        between = "-" if block["between"] is None else f"{block['between']:.3f}"
        lines.append(f"| {name} | {block['speedup']:.2f}x | {each} | {within} | {between} |")
    order = " > ".join(" ≈ ".join(group) for group in overall["ordering"])
    return "\n".join([*lines, "", f"ordering: {order}"])
