"""The context notes under a table: model, dtype, machine and engine, output lengths and
prompts behind its rows, and a note naming the rows of each machine when they are mixed."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from racer_bench.analysis import frames, names


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
        return [(frames.NOT_RECORDED_HARDWARE, frames.NOT_RECORDED_ENGINE, df)]
    keyed = df[SETTING_KEYS].fillna("").astype(str)
    return [
        (label, engine, df.loc[group.index])
        for (_, label, engine), group in keyed.groupby(SETTING_KEYS, sort=False)
    ]


def setting_text(df: pd.DataFrame) -> str:
    """``AMD EPYC, avx512, 2 cores, fast engine``; several joined when the runs differ."""
    return "; ".join(f"{label}, {engine_words(engine)}" for label, engine, _ in setting_groups(df))


def engine_words(engine: str) -> str:
    """``fast engine``; the not-recorded marker as it is."""
    return engine if engine == frames.NOT_RECORDED_ENGINE else f"{engine} engine"


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
