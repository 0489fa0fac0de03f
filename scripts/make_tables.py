"""Paper tables from a results folder, as Markdown and LaTeX.

    python scripts/make_tables.py --results results/racer_main --out docs/tables.md

writes ``docs/tables.md`` and ``docs/tables.tex`` (without ``--out`` the Markdown is printed).
Tables, each built only when the folder holds runs for it:

* main: lossless methods x Spec-Bench categories (+ overall, HumanEval, MGSM-ZH), speedup (MAT);
* speed: the main runs' absolute tok/s (AR and method), speedup [95 % CI], MAT, identical
  outputs and the machine each was measured on;
* spec_bench_categories: Spec-Bench's 13 categories x methods, speedup with its 95 % bootstrap
  interval, and MAT;
* ablation: RACER full / logits tree only / retrieval tree only / last logit / LRU off /
  lazy fail links;
* logitspec: speedup, MAT and retrieval success per task;
* asd: per task, Pareto-optimal (B, g, M) settings: throughput gain, MAT strict -> ASD,
  accuracy delta, answer agreement, log-likelihood gap, first divergence, divergence.

Papers' reported numbers (``racer_bench.analysis.paper_numbers``) sit in separate, labelled columns
unless ``--no-paper`` is given. Runs are loaded with ``racer_bench.analysis.frames`` (the newest run
per method variant, scheduler and task is kept); runs of different models, dtypes or hardware are
refused.

Schedulers: the main, speed, per-category and LogitSpec tables take runs of any scheduler
(``scheduler=auto`` is recorded as the scheduler it picked, e.g. ``confidence`` on a CPU) and
name it: a ``scheduler`` column in the row tables, ``PLD (fixed)`` in the per-category table's
header. Each (method, scheduler) pair is its own row (column), so two runs of the same method
and task that differ only in scheduler are both shown, never one dropped for the other; notes
that rank methods compare them within one scheduler.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from racer_bench.analysis import frames as F
from racer_bench.analysis import names
from racer_bench.analysis import paper_numbers as PN
from racer_bench.analysis.plots import SPEC_BENCH_GROUPS, asd_label, pareto_front
from racer_bench.tasks.spec_bench import MT_BENCH_CATEGORIES, SINGLE_TURN_CATEGORIES

DASH = "–"
ABLATIONS = (
    ("RACER (full)", ""),
    ("logits tree only", "retrieval=false"),
    ("retrieval tree only", "logits=false"),
    ("last logit instead of copy", "logit_source=last"),
    ("LRU off (unbounded pool)", "lru=false"),
    ("lazy fail links (reference code)", "fail_links=lazy"),
)


@dataclass
class Table:
    """A rendered-agnostic table: header, rows of cell strings, notes printed below it."""

    key: str
    title: str
    header: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)


# The papers' reported numbers (racer_bench/analysis/data/paper_numbers.yaml).
RACER_SPEC_BENCH = PN.table("racer_spec_bench")
SPEC_BENCH_LEADERBOARD = PN.table("spec_bench_leaderboard")
RACER_ABLATION_MAT = PN.table("racer_ablation_mat")
LOGITSPEC_HEADLINE = PN.table("logitspec_headline")
ASD_REPORTED = PN.table("asd_reported")
ASD_FROZEN = PN.table("asd_frozen")


def num(value: float | None, pattern: str) -> str:
    """``pattern.format(value)``, or a dash for a missing value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return DASH
    return pattern.format(value)


def speed_cell(row: pd.Series | None, interval: bool = False) -> str:
    """``"1.52× (2.10)"``: speedup over AR and MAT; with ``interval`` the speedup's 95 %
    bootstrap CI over prompts goes between them, ``"1.52× [1.31, 1.70] (2.10)"``."""
    if row is None:
        return DASH
    cell = num(row.get("speedup"), "{:.2f}×")
    low, high = row.get("speedup_ci_low"), row.get("speedup_ci_high")
    if interval and low is not None:
        cell += f" [{num(low, '{:.2f}')}, {num(high, '{:.2f}')}]"
    return f"{cell} ({num(row.get('mat'), '{:.2f}')})"


def reported(numbers: dict[str, PN.Reported] | None) -> str:
    """A paper's ``speedup (MAT)`` cell from its reported numbers."""
    if not numbers:
        return DASH
    cell = numbers["speedup"].text if "speedup" in numbers else DASH
    return f"{cell} ({numbers['mat'].text})" if "mat" in numbers else cell


def row_name(row: pd.Series) -> str:
    """``RACER [lru=false] / Spec-Bench``: how a note names the run behind a table row (a
    scheduler other than the fixed one in brackets: ``RACER (confidence) / HumanEval``)."""
    method = names.method_name(row["method"])
    scheduler = row.get("scheduler")
    if isinstance(scheduler, str) and scheduler != "fixed":
        method += f" ({scheduler})"
    variant = f" [{row['variant']}]" if row.get("variant") else ""
    return f"{method}{variant} / {names.task_name(row['task'])}"


SETTING_KEYS = ["hardware_id", "hardware", "engine"]
MIXED_NOTE = "Mixed machines or engines"


def setting_groups(df: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame]]:
    """The runs of ``df`` per (hardware fingerprint, engine): ``(label, engine, runs)``."""
    columns = [c for c in SETTING_KEYS if c in df]
    if len(columns) < len(SETTING_KEYS):  # frames without the columns: nothing recorded
        return [(F.NOT_RECORDED_HARDWARE, F.NOT_RECORDED_ENGINE, df)]
    keyed = df[SETTING_KEYS].fillna("").astype(str)
    return [
        (label, engine, df.loc[group.index])
        for (_, label, engine), group in keyed.groupby(SETTING_KEYS, sort=False)
    ]


def setting_text(df: pd.DataFrame) -> str:
    """``AMD EPYC, avx512, 2 cores, fast engine``; several joined when the runs differ."""
    return "; ".join(f"{label}, {engine_words(engine)}" for label, engine, _ in setting_groups(df))


def engine_words(engine: str) -> str:
    return engine if engine == F.NOT_RECORDED_ENGINE else f"{engine} engine"


def mixing_note(df: pd.DataFrame, name: Callable[[pd.Series], str] = row_name) -> str | None:
    """A note naming the rows of each machine / engine when a table mixes them (else None)."""
    groups = setting_groups(df)
    if len(groups) < 2:
        return None
    parts = [
        f"{', '.join(dict.fromkeys(name(row) for _, row in runs.iterrows()))} on {label} "
        f"({engine_words(engine)})"
        for label, engine, runs in groups
    ]
    return (
        f"{MIXED_NOTE}: these rows were measured on different machines or engines, so their "
        "speeds are not comparable with each other: " + "; ".join(parts) + "."
    )


def context_notes(df: pd.DataFrame, name: Callable[[pd.Series], str] = row_name) -> list[str]:
    """Model, dtype, hardware (fingerprint and engine), output length and prompts behind a table,
    and a note naming the rows concerned when the runs mix machines or engines."""
    first = df.iloc[0]
    lengths = ", ".join(
        f"{names.task_name(t)} {int(n)}"
        for t, n in df.groupby("task", sort=False)["max_new_tokens"].first().items()
    )
    prompts = ", ".join(
        f"{names.task_name(t)} {int(n)}"
        for t, n in df.groupby("task", sort=False)["n_prompts"].max().items()
    )
    notes = [
        f"Ours: {first['model']} ({first['dtype']}) on {first['device']} "
        f"[{setting_text(df)}]; max_new_tokens "
        f"{lengths}; prompts {prompts}; greedy unless stated; speedup = AR wall time / method "
        "wall time on the same prompts (prefill included), MAT = tokens per target forward."
    ]
    note = mixing_note(df, name)
    return [*notes, note] if note else notes


def rank_text(values: dict[str, float], pattern: str) -> str:
    """``"RACER 1.74× > PLD 1.57×"``: names by decreasing value."""
    ranked = sorted(values.items(), key=lambda item: -item[1])
    return " > ".join(f"{name} {pattern.format(value)}" for name, value in ranked)


def ordering_note(
    what: str, ours: dict[str, float], reference: dict[str, float], source: str, pattern: str
) -> str | None:
    """One sentence comparing our ranking by ``what`` with a paper's, over the names both have.

    Pairs ordered the other way round are named (``"PLD above Token Recycling"``); None when
    fewer than two names are shared."""
    shared = [name for name in ours if name in reference]
    if len(shared) < 2:
        return None
    by_ours = sorted(shared, key=lambda name: -ours[name])
    swapped = [
        f"{high} above {low}"
        for i, high in enumerate(by_ours)
        for low in by_ours[i + 1 :]
        if ours[high] > ours[low] and reference[high] < reference[low]
    ]
    verdict = (
        "the same order" if not swapped else "a different order: ours has " + ", ".join(swapped)
    )
    return (
        f"Ordering by {what}: ours {rank_text({n: ours[n] for n in shared}, pattern)}; "
        f"{PN.column(source)} {rank_text({n: reference[n] for n in shared}, pattern)}: {verdict}."
    )


def spec_bench_speedups(df: pd.DataFrame) -> dict[str, float]:
    """``{method label: Spec-Bench overall speedup}`` of a runs frame."""
    spec = df[df["task"] == "spec_bench"].dropna(subset=["speedup"])
    return {names.method_name(m): float(v) for m, v in spec[["method", "speedup"]].values}


def reported_values(numbers: dict[str, dict[str, PN.Reported]], key: str) -> dict[str, float]:
    """``{method label: value}`` of one reported metric, where the paper gives a number."""
    return {
        names.method_name(method): cell[key].value
        for method, cell in numbers.items()
        if key in cell and cell[key].value is not None
    }


def lossless_defaults(runs_df: pd.DataFrame) -> pd.DataFrame:
    """Runs of each method with its YAML defaults and a lossless verifier, under any scheduler
    (its ``scheduler`` column; frames without one count as ``fixed``)."""
    if runs_df.empty:
        return runs_df
    if "scheduler" not in runs_df:
        runs_df = runs_df.assign(scheduler="fixed")
    keep = (runs_df["variant"] == "") & runs_df["lossless"].astype(bool)
    return runs_df[keep & (runs_df["method"] != "ar")]


def entries(df: pd.DataFrame) -> list[tuple[str, str]]:
    """The (method, scheduler) pairs of a runs frame, one table row (or column) each: methods
    in display order, each method's schedulers in the order they appear."""
    methods = list(dict.fromkeys(df["method"]))
    pairs = dict.fromkeys(zip(df["method"], df["scheduler"], strict=True))
    return sorted(pairs, key=lambda pair: methods.index(pair[0]))


def scheduler_groups(df: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """``(suffix, runs)`` per scheduler of ``df``, for notes that compare methods within one
    scheduler; the suffix (`` (confidence scheduler)``) is empty when there is one scheduler."""
    groups = list(df.groupby("scheduler", sort=False)) if "scheduler" in df else []
    if len(groups) < 2:
        return [("", df)]
    return [(f" ({scheduler} scheduler)", runs) for scheduler, runs in groups]


def lookup(df: pd.DataFrame, **where: str) -> pd.Series | None:
    """The one row matching ``column=value`` pairs, or None."""
    mask = np.ones(len(df), dtype=bool)
    for column, value in where.items():
        mask &= (df[column] == value).to_numpy()
    return df[mask].iloc[0] if mask.any() else None


def main_table(runs_df: pd.DataFrame, cats_df: pd.DataFrame, paper: bool) -> Table | None:
    """Methods x Spec-Bench categories + overall + other tasks: ``speedup (MAT)``."""
    df = lossless_defaults(runs_df)
    if df.empty or df["speedup"].isna().all():
        return None
    cats = cats_df[cats_df["label"].isin(df["label"]) & (cats_df["task"] == "spec_bench")]
    groups = [g for g in SPEC_BENCH_GROUPS if g in set(cats["category"])]
    tasks = [t for t in dict.fromkeys(df["task"]) if t != "spec_bench"]
    header = ["method", "scheduler", *[g.replace("_", " ") for g in groups]]
    header += ["Spec-Bench overall"] if "spec_bench" in set(df["task"]) else []
    header += [names.task_name(t) for t in tasks]
    sources = ["racer", "spec_bench"] if paper else []
    header += [f"{PN.column(s)}: Spec-Bench overall" for s in sources]
    rows = []
    for method, scheduler in entries(df):
        where = {"method": method, "scheduler": scheduler}
        cells = [speed_cell(lookup(cats, category=g, **where)) for g in groups]
        if "spec_bench" in set(df["task"]):
            cells.append(speed_cell(lookup(df, task="spec_bench", **where)))
        cells += [speed_cell(lookup(df, task=t, **where)) for t in tasks]
        tables = {"racer": RACER_SPEC_BENCH, "spec_bench": SPEC_BENCH_LEADERBOARD}
        cells += [reported(tables[s].get(method)) for s in sources]
        rows.append([names.method_name(method), scheduler, *cells])
    notes = [
        "Cells: speedup over AR (×) and, in brackets, MAT. multi turn = the 8 MT-Bench "
        "categories of Spec-Bench (2 turns each). Scheduler: the draft-size scheduler the run "
        "used (scheduler=auto is shown as the one it picked); a method run under several has a "
        "row per scheduler.",
        *context_notes(df),
    ]
    if paper and "spec_bench" in set(df["task"]):
        notes += main_ordering_notes(df)
    return Table(
        "main",
        "Main results: speedup (MAT) per task and Spec-Bench category",
        header,
        rows,
        notes + PN.citations(sources),
    )


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
                names.method_name(method), scheduler, names.task_name(task),
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


MAIN_WHY = (
    "Why the numbers differ from the papers': a 135M-parameter target on 2 CPU cores pays for "
    "every drafted token (a 16-token verification forward costs about 1.8 one-token forwards "
    "here, docs/benchmarks.md; for a 7B model on an A100 a 64-token forward costs little more "
    "than a 1-token one), so the CPU defaults verify trees of 5-15 nodes instead of 64. "
    "Wide-tree methods (Token Recycling, RACER's logits tree, Lookahead) lose most of their "
    "lead; chains copied from the context (PLD, RACER's retrieval) lose least."
)


def main_ordering_notes(df: pd.DataFrame) -> list[str]:
    """How our Spec-Bench overall ranking compares with each paper's, and why it may differ."""
    notes = [
        ordering_note(f"Spec-Bench overall speedup{suffix}", spec_bench_speedups(runs),
                      reported_values(numbers, "speedup"), source, "{:.2f}×")
        for suffix, runs in scheduler_groups(df)
        for source, numbers in (("racer", RACER_SPEC_BENCH),
                                ("spec_bench", SPEC_BENCH_LEADERBOARD))
    ]  # fmt: skip
    notes = [n for n in notes if n]
    return [*notes, MAIN_WHY] if notes else []


# Pairs of methods compared category by category under the Spec-Bench table, with what
# separates them (the numbers come from the records; the mechanism text from the papers).
HEAD_TO_HEAD = (
    (
        "racer",
        "suffix",
        "Both keep state across requests and draft trees, from different evidence. RACER merges "
        "n-gram matches of an Aho-Corasick automaton over the context (LRU-bounded, kept across "
        "prompts) with a copy-logit tree (for each token, the target's top-8 at its latest "
        "occurrence), so it drafts even where nothing repeats verbatim. SuffixDecoding drafts "
        "only continuations seen before: the longest suffix of the context matched in suffix "
        "trees of this prompt and output and of earlier outputs, alpha x match-length nodes "
        "at most, so it drafts long on repetitive text and little on novel text. Which wins "
        "depends on what a verified node costs: where each extra node costs time (these CPU "
        "runs), a few well-supported nodes beat a higher MAT bought with many; where a 64-node "
        "forward costs about one token's (a GPU with a 7B target), MAT decides.",
    ),
)


def duel_cell(row: pd.Series) -> str:
    """``1.42× (MAT 2.25, 10.4 nodes)``: speedup, MAT and mean draft size where recorded."""
    extra = [f"MAT {row['mat']:.2f}"] if pd.notna(row.get("mat")) else []
    if pd.notna(row.get("draft_size_mean")):
        extra.append(f"{row['draft_size_mean']:.1f} nodes")
    return f"{row['speedup']:.2f}×" + (f" ({', '.join(extra)})" if extra else "")


def duel_note(
    cats: pd.DataFrame, categories: Sequence[str], pair: tuple[str, str, str], suffix: str = ""
) -> str | None:
    """In which categories each method of a ``HEAD_TO_HEAD`` pair is faster, and why (None when
    no category has both); ``suffix`` names the scheduler the runs share."""
    first, second, why = pair
    wins: dict[str, list[str]] = {first: [], second: []}
    for category in categories:
        rows = cats[cats["category"] == category]
        a, b = lookup(rows, method=first), lookup(rows, method=second)
        if a is None or b is None:
            continue
        winner = first if a["speedup"] >= b["speedup"] else second
        wins[winner].append(f"{category.replace('_', ' ')} {duel_cell(a)} vs {duel_cell(b)}")
    if not wins[first] and not wins[second]:
        return None
    a_name, b_name = names.method_name(first), names.method_name(second)
    total = len(wins[first]) + len(wins[second])
    parts = [f"{name} faster in {len(wins[m])} of {total} ({'; '.join(wins[m]) or DASH})"
             for m, name in ((first, a_name), (second, b_name))]  # fmt: skip
    return (f"{a_name} vs {b_name} per category{suffix} ({a_name} first; nodes = mean draft "
            f"nodes verified per step): {', '.join(parts)}. {why}")  # fmt: skip


def head_to_head_notes(cats: pd.DataFrame, categories: Sequence[str]) -> list[str]:
    """A :func:`duel_note` per pair of ``HEAD_TO_HEAD`` present, within each scheduler."""
    notes = [
        duel_note(runs, categories, pair, suffix)
        for pair in HEAD_TO_HEAD
        for suffix, runs in scheduler_groups(cats)
    ]
    return [note for note in notes if note]


def spec_bench_categories_table(runs_df: pd.DataFrame, raw_df: pd.DataFrame) -> Table | None:
    """Spec-Bench's 13 categories x methods: ``speedup [95 % CI] (MAT)``, prompts per category."""
    df = lossless_defaults(runs_df)
    if df.empty or raw_df.empty:
        return None
    df = df[df["task"] == "spec_bench"]
    cats = raw_df[raw_df["label"].isin(df["label"]) & (raw_df["task"] == "spec_bench")]
    if cats.empty:
        return None
    order = [*MT_BENCH_CATEGORIES, *SINGLE_TURN_CATEGORIES]
    present = set(cats["category"])
    categories = [c for c in order if c in present] + sorted(present - set(order))
    columns = entries(cats)
    header = ["category", "prompts", *[f"{names.method_name(m)} ({s})" for m, s in columns]]
    rows = []
    for category in [*categories, None]:
        where = cats[cats["category"] == category] if category else df
        n = int(where["n_prompts"].max())
        name = category.replace("_", " ") if category else "all"
        cells = [speed_cell(lookup(where, method=m, scheduler=s), interval=True)
                 for m, s in columns]  # fmt: skip
        rows.append([name, str(n), *cells])
    notes = [
        "Cells: speedup over AR (×), its 95 % bootstrap interval over the category's prompts in "
        "square brackets, and MAT in brackets. The first 8 rows are MT-Bench (2 turns each). "
        "Columns: method (scheduler).",
        *head_to_head_notes(cats, categories),
        *context_notes(df),
    ]
    title = "Spec-Bench per category: speedup [95 % CI] (MAT)"
    return Table("spec_bench_categories", title, header, rows, notes)


def ablation_table(runs_df: pd.DataFrame, paper: bool) -> Table | None:
    """RACER variants (one override each) per task: ``speedup (MAT)`` and retrieval hit rate."""
    df = runs_df[(runs_df["method"] == "racer") & runs_df["lossless"].astype(bool)]
    present = [(name, v) for name, v in ABLATIONS if (df["variant"] == v).any()]
    if len(present) < 2:
        return None
    tasks = list(dict.fromkeys(df["task"]))
    header = ["RACER variant", "override"]
    for task in tasks:
        name = names.task_name(task)
        header += [f"{name}: speedup (MAT)", f"{name}: retrieval hit"]
    header += [f"{PN.column('racer')}: MAT (Spec-Bench)"] if paper else []
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
    if paper and "spec_bench" in tasks:
        notes += ablation_ordering_notes(df, present)
    return Table(
        "ablation",
        "RACER ablations",
        header,
        rows,
        notes + PN.citations(["racer"] if paper else []),
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


def logitspec_table(runs_df: pd.DataFrame, paper: bool) -> Table | None:
    """Retrieval-based methods per task: speedup, MAT and retrieval success (hit rate)."""
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
    header += [PN.column("logitspec"), f"{PN.column('racer')}: Spec-Bench"] if paper else []
    rows = [retrieval_cells(df, entry, tasks, paper) for entry in entries(df)]
    notes = [
        "Retrieval success = share of steps whose draft holds a retrieved node "
        "(LogitSpec: an n-gram match of the next-next token guesses).",
        *context_notes(df),
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
        notes + PN.citations(sources),
    )


def asd_rows(df: pd.DataFrame) -> pd.DataFrame:
    """One task's ASD runs to show: the Pareto front over throughput gain and every measured
    quality measure (accuracy delta, answer agreement, log-likelihood gap), and the paper's
    frozen setting."""
    gain = df["gain_vs_strict"].to_numpy(dtype=float)
    quality = [df[c].to_numpy(dtype=float) for c in QUALITY_COLUMNS if c in df]
    if all(np.isnan(q).all() for q in quality):  # speed-only task: the fastest setting
        front = gain == np.nanmax(gain)
    else:
        front = pareto_front(gain, *quality)
    frozen = np.ones(len(df), dtype=bool)
    for column, value in ASD_FROZEN.items():
        frozen &= (df[column] == value).to_numpy() if column in df else False
    return df[front | frozen].sort_values("gain_vs_strict", ascending=False)


def asd_paper_cells(row: pd.Series) -> list[str]:
    """The ASD paper's numbers on the row of its frozen setting (dashes elsewhere)."""
    if any(row.get(k) != v for k, v in ASD_FROZEN.items()):
        return [DASH] * 4
    r = ASD_REPORTED
    accuracy = r["accuracy_delta_humaneval"].text if row["task"] == "humaneval" else DASH
    divergence = r["divergence_math"].text if row["task"] in ("gsm8k", "math500") else DASH
    return [r["gain"].text, r["mat"].text, accuracy, divergence]


def asd_comparison_notes(df: pd.DataFrame) -> list[str]:
    """Our gains at the paper's frozen setting, per drafter, beside the paper's range."""
    frozen = np.ones(len(df), dtype=bool)
    for column, value in ASD_FROZEN.items():
        frozen &= (df[column] == value).to_numpy() if column in df else False
    rows = df[frozen]
    if rows.empty:
        return []
    ours = "; ".join(
        f"{names.task_name(r['task'])} {names.method_name(r['method'])}"
        f" {num(r['gain_vs_strict'], '{:+.1%}')} (MAT {num(r.get('strict_mat'), '{:.2f}')} → "
        f"{num(r['mat'], '{:.2f}')})"
        for _, r in rows.iterrows()
    )
    return [
        f"At the paper's frozen setting B=8 g=0.25 M=2, ours: {ours}; "
        f"{PN.column('asd')}: {ASD_REPORTED['gain'].text}, MAT "
        f"{ASD_REPORTED['mat'].text}. {ASD_WHY}"
    ]


ASD_WHY = (
    "Why it may differ: a CPU target pays for every verified token, so a longer accepted run "
    "turns into wall time more directly than on a GPU, while the 8-shot GSM8K prompts make "
    "prefill a large share of wall time; the paper's drafter (DSpark-14B) drafts far more "
    "accurately than any drafter of a 135M model, so fewer of its blocks end in a mismatch "
    "that ASD could accept."
)


QUALITY_COLUMNS = ("accuracy_delta", "agreement", "logprob_gap")  # higher = closer to strict
NOT_MEASURED = "not measured"
ASD_HEADER = ["task", "drafter", "setting", "throughput gain", "MAT strict → ASD",
              "accuracy Δ (pp) [95% CI]", "answer agreement [95% CI]",
              "log-lik gap (nats/token) [95% CI]", "first divergence [95% CI]",
              "divergence"]  # fmt: skip
ASD_NOTE = (
    "Rows: Pareto-optimal (B, g, M) settings over throughput gain and the measured quality "
    "measures (accuracy delta, answer agreement, log-likelihood gap) per task, plus the "
    "paper's frozen setting B=8 g=0.25 M=2 when it was run. Gain = ASD / strict greedy "
    "throughput - 1 (same drafter, same prompts). Each quality measure pairs ASD with strict "
    "greedy on the same prompt, with a paired bootstrap 95% CI over prompts: answer agreement "
    "= share of prompts whose extracted final answer equals strict's; log-lik gap = mean "
    "per-token target log-probability of the ASD output minus that of the strict output "
    "(teacher-forced; 0 = as likely as strict); first divergence = position of the first "
    "token that differs from strict, as a share of the ASD output (100% = none differs); "
    "divergence = share of prompts whose output differs from strict greedy. 'not measured': "
    "the records predate the measure or the task has no answer to compare."
)


def with_ci(row: pd.Series, key: str, pattern: str, scale: float = 1.0) -> str:
    """``"value [low, high]"`` of a measure and its CI columns, or "not measured"."""
    value = row.get(key, math.nan)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NOT_MEASURED
    low, high = (row.get(f"{key}_ci_{end}", math.nan) for end in ("low", "high"))
    cells = [num(v * scale if v is not None else None, pattern) for v in (value, low, high)]
    return f"{cells[0]} [{cells[1]}, {cells[2]}]"


def asd_cells(row: pd.Series) -> list[str]:
    """Our cells of one ASD run (a runs-frame row)."""
    return [
        names.task_name(row["task"]),
        names.method_name(row["method"]),
        asd_label(row),
        num(row["gain_vs_strict"], "{:+.1%}"),
        f"{num(row.get('strict_mat'), '{:.2f}')} → {num(row['mat'], '{:.2f}')}",
        with_ci(row, "accuracy_delta", "{:+.1f}", 100),
        with_ci(row, "agreement", "{:.0%}"),
        with_ci(row, "logprob_gap", "{:+.3f}"),
        with_ci(row, "first_divergence", "{:.0%}"),
        num(row.get("divergence"), "{:.0%}"),
    ]


def asd_row_name(row: pd.Series) -> str:
    """``GSM8K PLD B=8 g=0.25 M=2``: an ASD row as the table shows it."""
    task, drafter, setting = asd_cells(row)[:3]
    return f"{task} {drafter} {setting}"


def asd_table(runs_df: pd.DataFrame, paper: bool) -> Table | None:
    """ASD vs strict greedy with the same drafter, per task and (B, g, M) setting."""
    if "gain_vs_strict" not in runs_df or runs_df["gain_vs_strict"].isna().all():
        return None
    df = runs_df.dropna(subset=["gain_vs_strict"])
    header = list(ASD_HEADER)
    if paper:
        header += [f"{PN.column('asd')}: {h}" for h in ("gain", "MAT", "accuracy Δ", "divergence")]
    rows, shown = [], []
    for _, task_df in df.groupby("task", sort=False):
        shown.append(asd_rows(task_df))
        for _, row in shown[-1].iterrows():
            rows.append(asd_cells(row) + (asd_paper_cells(row) if paper else []))
    notes = [ASD_NOTE, *context_notes(pd.concat(shown), asd_row_name)]
    notes += PN.citations(["asd"] if paper else [])
    notes += asd_comparison_notes(df) if paper else []
    return Table("asd", "Approximate speculative decoding (lossy) vs strict greedy", header,
                 rows, notes)  # fmt: skip


def to_markdown(table: Table) -> str:
    """A Markdown section: title, pipe table, notes."""
    lines = [
        f"### {table.title}",
        "",
        "| " + " | ".join(table.header) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(table.header))) + "|",
    ]
    lines += [
        "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in table.rows
    ]
    lines += ["", *[f"- {note}" for note in table.notes]]
    return "\n".join(lines) + "\n"


LATEX_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "_": r"\_",
    "#": r"\#",
    "$": r"\$",
    "{": r"\{",
    "}": r"\}",
    "×": r"$\times$",
    "→": r"$\rightarrow$",
    "≈": r"$\approx$",
    "Δ": r"$\Delta$",
    "−": r"$-$",
    "–": "--",
    "τ": r"$\tau$",
    "≥": r"$\geq$",
    ">": r"$>$",
    "·": r"$\cdot$",
}


def latex_escape(text: str) -> str:
    return "".join(LATEX_ESCAPES.get(ch, ch) for ch in text)


def to_latex(table: Table) -> str:
    """A booktabs ``table`` environment with the notes below the tabular."""
    spec = "l" + "r" * (len(table.header) - 1)
    lines = [
        f"% {table.key}",
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(latex_escape(h) for h in table.header) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(latex_escape(c) for c in row) + r" \\" for row in table.rows]
    lines += [
        r"\bottomrule",
        r"\end{tabular}",
        rf"\caption{{{latex_escape(table.title)}}}",
        rf"\label{{tab:{table.key}}}",
    ]
    lines += [rf"\par\smallskip{{\footnotesize {latex_escape(n)}\par}}" for n in table.notes]
    return "\n".join([*lines, r"\end{table}"]) + "\n"


# Each table is built from the runs of its own experiment (conf/experiment/) when the folders
# hold any, so that e.g. the LogitSpec table's 10-prompt runs never replace the main table's
# 26-prompt runs of the same method; without them (an ad-hoc folder) from every run given.
HOME_EXPERIMENTS = {
    "main": "racer_main",
    "spec_bench_categories": "racer_main",
    "ablation": "racer_ablation",
    "logitspec": "logitspec_table",
}


def table_runs(runs: Sequence[F.Run], table: str, newest: bool) -> list[F.Run]:
    """The runs ``table`` is built from: its home experiment's, else all; newest reruns only."""
    home = HOME_EXPERIMENTS.get(table)
    chosen = [r for r in runs if home and r.config.get("experiment_name") == home] or list(runs)
    return F.latest_runs(chosen) if newest else chosen


def build_tables(runs: Sequence[F.Run], paper: bool = True, newest: bool = True) -> list[Table]:
    """Every table the runs have data for (``newest``: reruns replace older runs)."""

    def frames(table: str) -> tuple[list[F.Run], pd.DataFrame]:
        chosen = table_runs(runs, table, newest)
        return chosen, F.runs_frame(chosen)

    main_runs, main_df = frames("main")
    cat_runs, cat_df = frames("spec_bench_categories")
    tables = [
        main_table(main_df, F.categories_frame(main_runs), paper),
        speed_table(main_df),
        spec_bench_categories_table(cat_df, F.categories_frame(cat_runs, "category")),
        ablation_table(frames("ablation")[1], paper),
        logitspec_table(frames("logitspec")[1], paper),
        asd_table(frames("asd")[1], paper),
    ]
    return [t for t in tables if t is not None]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    F.add_cli_args(parser)
    parser.add_argument("--out", type=Path, help="Markdown file; a .tex twin is written beside it")
    parser.add_argument("--no-paper", action="store_true", help="omit the papers' numbers")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> list[Table]:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    args = parse_args(argv)
    runs = F.load_cli(args, newest=False)  # table_runs keeps the newest within each table
    tables = build_tables(runs, paper=not args.no_paper, newest=not args.all_runs)
    if not tables:
        sys.exit(f"error: no table can be built from {', '.join(map(str, args.results))}")
    sources = " ".join(str(p) for p in args.results)
    markdown = f"<!-- generated by scripts/make_tables.py --results {sources} -->\n\n"
    markdown += "\n".join(to_markdown(t) for t in tables)
    if args.out is None:
        print(markdown)
        return tables
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(markdown, encoding="utf-8")
    args.out.with_suffix(".tex").write_text("\n".join(to_latex(t) for t in tables), "utf-8")
    print(f"wrote {args.out} and {args.out.with_suffix('.tex')}: {[t.key for t in tables]}")
    return tables


if __name__ == "__main__":
    main()
