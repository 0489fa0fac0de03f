"""The LogitSpec table: retrieval-based methods per task, speedup, MAT and retrieval success,
beside LogitSpec's and RACER's reported numbers."""

from __future__ import annotations

import pandas as pd

from racer_bench.analysis import names, paper_numbers
from racer_bench.analysis.tables.cells import num
from racer_bench.analysis.tables.context import context_notes
from racer_bench.analysis.tables.noise import ties_note
from racer_bench.analysis.tables.papers import (
    LOGITSPEC_HEADLINE,
    RACER_SPEC_BENCH,
    ordering_note,
    reported,
    reported_values,
    spec_bench_speedups,
)
from racer_bench.analysis.tables.render import Table
from racer_bench.analysis.tables.rows import entries, lookup, lossless_defaults, scheduler_groups


def retrieval_cells(
    df: pd.DataFrame, entry: tuple[str, str], tasks: list[str], paper: bool
) -> list[str]:
    """One (method, scheduler) row of the LogitSpec table."""
    method, scheduler = entry
    cells = [names.method_name(method), scheduler]
    for task in tasks:
        row = lookup(df, method=method, scheduler=scheduler, task=task)
        values = [None if row is None else row.get(k) for k in
                  ("speedup", "mat", "retrieval_hit_rate")]  # fmt: skip
        cells += [num(v, f) for v, f in zip(values, ("{:.2f}×", "{:.2f}", "{:.0%}"), strict=True)]
    if paper:
        own = LOGITSPEC_HEADLINE if method == "logitspec" else None
        cells += [reported(own), reported(RACER_SPEC_BENCH.get(method))]
    return cells


LOGITSPEC_WHY = (
    "Why it may differ: LogitSpec's next-next-token guesses widen retrieval into a tree whose "
    "extra nodes are cheap on a GPU; on this CPU each extra node costs verification time, so "
    "the wider retrieval pays only where its hits are frequent."
)


def logitspec_table(runs_df: pd.DataFrame, paper: bool, floor: float | None = None) -> Table | None:
    """Retrieval-based methods per task: speedup, MAT and retrieval success (hit rate);
    speedups closer than the noise ``floor`` are named as ties."""
    df = lossless_defaults(runs_df)
    if df.empty or "logitspec" not in set(df["method"]):
        return None
    with_retrieval = df.groupby("method")["retrieval_hit_rate"].max().fillna(0) > 0
    df = df[df["method"].isin(with_retrieval[with_retrieval].index)]
    tasks = list(dict.fromkeys(df["task"]))
    header = ["method", "scheduler"]
    for task in tasks:
        name = names.task_name(task)
        header += [f"{name}: speedup", f"{name}: MAT", f"{name}: retrieval success"]
    header += (
        [paper_numbers.column("logitspec"), f"{paper_numbers.column('racer')}: Spec-Bench"]
        if paper
        else []
    )
    rows = [retrieval_cells(df, entry, tasks, paper) for entry in entries(df)]
    notes = [
        "Retrieval success = share of steps whose draft holds a retrieved node "
        "(LogitSpec: an n-gram match of the next-next token guesses).",
        *context_notes(df),
        *speedup_ties(df, tasks, floor),
    ]
    reference = reported_values(RACER_SPEC_BENCH, "speedup")
    ordering = [
        ordering_note(f"Spec-Bench speedup{suffix}", spec_bench_speedups(runs), reference,
                      "racer", "{:.2f}×")
        for suffix, runs in scheduler_groups(df)
    ]  # fmt: skip
    ordering = [note for note in ordering if note]
    notes += [*ordering, LOGITSPEC_WHY] if ordering and paper else []
    sources = ["logitspec", "racer"] if paper else []
    return Table(
        "logitspec",
        "LogitSpec and retrieval-based drafting",
        header,
        rows,
        notes + paper_numbers.citations(sources),
    )


def speedup_ties(df: pd.DataFrame, tasks: list[str], floor: float | None) -> list[str]:
    """A :func:`ties_note` per task and scheduler: methods whose speedups are within ``floor``."""
    notes = []
    for suffix, runs in scheduler_groups(df):
        for task in tasks:
            rows = runs[(runs["task"] == task) & runs["speedup"].notna()]
            pairs = zip(rows["method"], rows["speedup"], strict=True)
            speedups = {names.method_name(m): float(v) for m, v in pairs}
            notes.append(ties_note(speedups, floor, f"{names.task_name(task)} speedup{suffix}"))
    return [note for note in notes if note]
