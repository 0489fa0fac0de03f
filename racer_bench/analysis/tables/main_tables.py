"""The main results table (speedup and MAT per task and Spec-Bench category group) and the
absolute speed table (tok/s of AR and of each method, with the machine each was measured on)."""

from __future__ import annotations

import pandas as pd

from racer_bench.analysis import names, paper_numbers
from racer_bench.analysis.plots import SPEC_BENCH_GROUPS
from racer_bench.analysis.tables.cells import DASH, num, speed_cell
from racer_bench.analysis.tables.context import (
    context_notes,
    engine_words,
    setting_groups,
    setting_text,
)
from racer_bench.analysis.tables.noise import (
    AA_METHOD,
    AA_NAME,
    aa_rows,
    floor_note,
    noise_floor,
)
from racer_bench.analysis.tables.papers import (
    RACER_SPEC_BENCH,
    SPEC_BENCH_LEADERBOARD,
    ordering_note,
    reported,
    reported_values,
    spec_bench_speedups,
)
from racer_bench.analysis.tables.render import Table
from racer_bench.analysis.tables.rows import entries, lookup, lossless_defaults, scheduler_groups


def main_table(runs_df: pd.DataFrame, cats_df: pd.DataFrame, paper: bool) -> Table | None:
    """Methods x Spec-Bench categories + overall + other tasks: ``speedup (MAT)``; an A/A row
    (AR against AR) first when the runs have one, and its noise floor in the notes."""
    df = lossless_defaults(runs_df)
    if df.empty or df["speedup"].isna().all():
        return None
    shown = with_aa(runs_df, df)
    cats = cats_df[cats_df["label"].isin(shown["label"]) & (cats_df["task"] == "spec_bench")]
    groups = [g for g in SPEC_BENCH_GROUPS if g in set(cats["category"])]
    tasks = [t for t in dict.fromkeys(df["task"]) if t != "spec_bench"]
    header = ["method", "scheduler", *[g.replace("_", " ") for g in groups]]
    header += ["Spec-Bench overall"] if "spec_bench" in set(df["task"]) else []
    header += [names.task_name(t) for t in tasks]
    sources = ["racer", "spec_bench"] if paper else []
    header += [f"{paper_numbers.column(s)}: Spec-Bench overall" for s in sources]
    rows = []
    for method, scheduler in entries(shown):
        where = {"method": method, "scheduler": scheduler}
        cells = [speed_cell(lookup(cats, category=g, **where)) for g in groups]
        if "spec_bench" in set(df["task"]):
            cells.append(speed_cell(lookup(shown, task="spec_bench", **where)))
        cells += [speed_cell(lookup(shown, task=t, **where)) for t in tasks]
        tables = {"racer": RACER_SPEC_BENCH, "spec_bench": SPEC_BENCH_LEADERBOARD}
        cells += [reported(tables[s].get(method)) for s in sources]
        rows.append([shown_name(method), scheduler, *cells])
    notes = [
        "Cells: speedup over AR (×) and, in brackets, MAT. multi turn = the 8 MT-Bench "
        "categories of Spec-Bench (2 turns each). Scheduler: the draft-size scheduler the run "
        "used (scheduler=auto is shown as the one it picked); a method run under several has a "
        "row per scheduler.",
        *filter(None, [floor_note(runs_df)]),
        *context_notes(df),
    ]
    if paper and "spec_bench" in set(df["task"]):
        notes += main_ordering_notes(df, noise_floor(runs_df))
    return Table(
        "main",
        "Main results: speedup (MAT) per task and Spec-Bench category",
        header,
        rows,
        notes + paper_numbers.citations(sources),
    )


def with_aa(runs_df: pd.DataFrame, df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with the A/A runs of ``runs_df`` in front (``df`` itself without any)."""
    aa = aa_rows(runs_df)
    if aa.empty:
        return df
    return pd.concat([aa.assign(scheduler=aa.get("scheduler", "fixed")), df])


def shown_name(method: str) -> str:
    """A row's method name; the A/A row says it is one."""
    return AA_NAME if method == AA_METHOD else names.method_name(method)


MAIN_WHY = (
    "Why the numbers differ from the papers': a 135M-parameter target on 2 CPU cores pays for "
    "every drafted token (a verification forward over a tree costs several one-token "
    "forwards here, docs/benchmarks.md; for a 7B model on an A100 a 64-token forward costs "
    "little more than a 1-token one), so the CPU runs verify trees of a few nodes instead of "
    "64 (the confidence scheduler cuts each draft to what its measured cost repays). "
    "Wide-tree methods (Token Recycling, RACER's logits tree, Lookahead) lose most of their "
    "lead; chains copied from the context (PLD, SuffixDecoding, SAM, RACER's retrieval) lose "
    "least."
)


def main_ordering_notes(df: pd.DataFrame, floor: float | None = None) -> list[str]:
    """How our Spec-Bench overall ranking compares with each paper's, and why it may differ
    (speedups inside the noise ``floor`` are ties)."""
    notes = [
        ordering_note(f"Spec-Bench overall speedup{suffix}", spec_bench_speedups(runs),
                      reported_values(numbers, "speedup"), source, "{:.2f}×", floor)
        for suffix, runs in scheduler_groups(df)
        for source, numbers in (("racer", RACER_SPEC_BENCH),
                                ("spec_bench", SPEC_BENCH_LEADERBOARD))
    ]  # fmt: skip
    notes = [n for n in notes if n]
    return [*notes, MAIN_WHY] if notes else []


def ar_speed_note(df: pd.DataFrame) -> str:
    """The AR baseline's tok/s range per machine and engine: how fast each machine is."""
    parts = []
    for label, engine, runs in setting_groups(df):
        speeds = runs["baseline_tokens_per_s"].dropna()
        if not speeds.empty:
            parts.append(f"{label}, {engine_words(engine)}: {speeds.min():.1f}-"
                         f"{speeds.max():.1f}")  # fmt: skip
    return "AR tok/s per machine and engine (same model, loop and token budget): " + "; ".join(
        parts
    )


def speed_table(runs_df: pd.DataFrame) -> Table | None:
    """Per method and task: AR and method tok/s, speedup [95 % CI], MAT, identical outputs and
    the machine and engine they were measured on (absolute speed is only comparable within
    one machine)."""
    df = lossless_defaults(runs_df)
    if df.empty or "baseline_tokens_per_s" not in df or df["speedup"].isna().all():
        return None
    df = with_aa(runs_df, df)
    header = ["method", "scheduler", "task", "prompts", "AR tok/s", "method tok/s",
              "speedup [95 % CI]", "MAT", "identical", "measured on"]  # fmt: skip
    rows = []
    for method, scheduler in entries(df):
        for task in dict.fromkeys(df["task"]):
            row = lookup(df, method=method, scheduler=scheduler, task=task)
            if row is None:
                continue
            identical = row.get("identical")
            rows.append([
                shown_name(method), scheduler, names.task_name(task),
                str(int(row["n_prompts"])),
                num(row.get("baseline_tokens_per_s"), "{:.1f}"),
                num(row.get("tokens_per_s"), "{:.1f}"),
                speed_cell(row, interval=True).rsplit(" (", 1)[0],
                num(row.get("mat"), "{:.2f}"),
                DASH if identical is None else f"{identical:.0%}",
                setting_text(df.loc[[row.name]]),
            ])  # fmt: skip
    notes = [
        "AR tok/s and method tok/s: generated tokens per second of wall time (prefill "
        "included) of the autoregressive baseline and of the method, interleaved per prompt in "
        "one process; speedup = AR wall time / method wall time over the same prompts, with "
        "its 95 % bootstrap interval over prompts. Compare absolute tok/s only between rows "
        "measured on the same machine.",
        ar_speed_note(df),
        *context_notes(df),
    ]
    title = "Absolute speed: tok/s of AR and of each method, speedup [95 % CI]"
    return Table("speed", title, header, rows, notes)
