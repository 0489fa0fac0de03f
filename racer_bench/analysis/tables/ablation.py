"""The RACER ablation table: one override of ``conf/method/racer.yaml`` per variant, per task
speedup, MAT and retrieval hit rate, beside the RACER paper's MAT."""

from __future__ import annotations

import pandas as pd

from racer_bench.analysis import names, paper_numbers
from racer_bench.analysis.tables.cells import DASH, num, speed_cell
from racer_bench.analysis.tables.context import context_notes
from racer_bench.analysis.tables.noise import ties_note
from racer_bench.analysis.tables.papers import RACER_ABLATION_MAT, ordering_note
from racer_bench.analysis.tables.render import Table
from racer_bench.analysis.tables.rows import lookup

ABLATIONS = (
    ("RACER (full)", ""),
    ("logits tree only", "retrieval=false"),
    ("retrieval tree only", "logits=false"),
    ("last logit instead of copy", "logit_source=last"),
    ("LRU off (unbounded pool)", "lru=false"),
    ("lazy fail links (reference code)", "fail_links=lazy"),
)


def ablation_table(runs_df: pd.DataFrame, paper: bool, floor: float | None = None) -> Table | None:
    """RACER variants (one override each) per task: ``speedup (MAT)`` and retrieval hit rate;
    speedups closer than the noise ``floor`` are named as ties."""
    df = runs_df[(runs_df["method"] == "racer") & runs_df["lossless"].astype(bool)]
    present = [(name, v) for name, v in ABLATIONS if (df["variant"] == v).any()]
    if len(present) < 2:
        return None
    tasks = list(dict.fromkeys(df["task"]))
    header = ["RACER variant", "override"]
    for task in tasks:
        name = names.task_name(task)
        header += [f"{name}: speedup (MAT)", f"{name}: retrieval hit"]
    header += [f"{paper_numbers.column('racer')}: MAT (Spec-Bench)"] if paper else []
    rows = []
    for name, variant in present:
        cells = [name, variant or "defaults"]
        for task in tasks:
            row = lookup(df, variant=variant, task=task)
            hit = None if row is None else row.get("retrieval_hit_rate")
            cells += [speed_cell(row), num(hit, "{:.0%}")]
        if paper:
            cells.append(
                RACER_ABLATION_MAT[variant].text if variant in RACER_ABLATION_MAT else DASH
            )
        rows.append(cells)
    notes = [
        "Each variant changes one key of conf/method/racer.yaml (method.<key>=<value>). "
        "Retrieval hit = share of steps whose draft holds a retrieved node.",
        *context_notes(df),
    ]
    for task in tasks:
        speedups = {name: float(row["speedup"]) for name, variant in present
                    if (row := lookup(df, variant=variant, task=task)) is not None
                    and not pd.isna(row.get("speedup"))}  # fmt: skip
        notes.append(ties_note(speedups, floor, f"{names.task_name(task)} speedup"))
    notes = [note for note in notes if note]
    if paper and "spec_bench" in tasks:
        notes += ablation_ordering_notes(df, present)
    return Table(
        "ablation",
        "RACER ablations",
        header,
        rows,
        notes + paper_numbers.citations(["racer"] if paper else []),
    )


ABLATION_WHY = (
    "Why it may differ: the paper verifies 64-node trees on a GPU, where the logits tree fills "
    "most of the capacity; with the CPU's few nodes the retrieval chain, which copies whole "
    "spans of a repetitive small-model context, carries a larger share of the accepted tokens."
)


def ablation_ordering_notes(df: pd.DataFrame, present: list[tuple[str, str]]) -> list[str]:
    """Our Spec-Bench MAT ranking of the ablation variants beside the RACER paper's."""
    ours, reference = {}, {}
    for name, variant in present:
        row = lookup(df, variant=variant, task="spec_bench")
        if row is not None and not pd.isna(row.get("mat")):
            ours[name] = float(row["mat"])
        if variant in RACER_ABLATION_MAT and variant != "logit_source=last":
            reference[name] = RACER_ABLATION_MAT[variant].value
    note = ordering_note("Spec-Bench MAT", ours, reference, "racer", "{:.2f}")
    return [note, ABLATION_WHY] if note else []
