"""Spec-Bench per category: speedup with its 95 % interval and MAT for each of the 13
categories and method, and the head-to-head notes of method pairs category by category."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from racer_bench.analysis import names
from racer_bench.analysis.tables.cells import DASH, speed_cell
from racer_bench.analysis.tables.context import context_notes
from racer_bench.analysis.tables.render import Table
from racer_bench.analysis.tables.rows import entries, lookup, lossless_defaults, scheduler_groups
from racer_bench.tasks.spec_bench import MT_BENCH_CATEGORIES, SINGLE_TURN_CATEGORIES

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
