"""Which runs fill a table: each method's lossless defaults, one row per (method, scheduler),
the runs of each scheduler, and the one row matching a set of column values."""

from __future__ import annotations

import numpy as np
import pandas as pd


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
