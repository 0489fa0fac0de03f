"""A table's noise floor: how far apart two identical decoders land on one machine, measured by
the A/A rows (``method=ar``: AR against AR on the same prompts, in the same interleaved loop),
and the ties it implies: two speedups closer than the floor are not an ordering."""

from __future__ import annotations

import math

import pandas as pd

AA_METHOD = "ar"  # the A/A row's method: the drafter that proposes nothing
AA_NAME = "AR (A/A)"


def aa_rows(runs_df: pd.DataFrame) -> pd.DataFrame:
    """The A/A runs of a runs frame (lossless, the method's own defaults)."""
    if runs_df.empty or "method" not in runs_df:
        return runs_df.iloc[0:0]
    keep = (runs_df["method"] == AA_METHOD) & (runs_df["variant"] == "")
    return runs_df[keep & runs_df["lossless"].astype(bool)]


def aa_distance(row: pd.Series) -> float:
    """How far one A/A run lands from 1.00×: the larger of its offset and its 95 % interval's
    half-width (NaN without a speedup)."""
    speedup = row.get("speedup")
    if speedup is None or math.isnan(speedup):
        return float("nan")
    low, high = row.get("speedup_ci_low"), row.get("speedup_ci_high")
    half = (high - low) / 2 if low is not None and high is not None else 0.0
    return max(abs(speedup - 1.0), half if not math.isnan(half) else 0.0)


def noise_floor(runs_df: pd.DataFrame) -> float | None:
    """The relative noise floor: the largest A/A distance over the frame's A/A runs (None
    without one)."""
    distances = [
        d for _, row in aa_rows(runs_df).iterrows() if not math.isnan(d := aa_distance(row))
    ]
    return max(distances) if distances else None


def tied(a: float, b: float, floor: float | None) -> bool:
    """Whether two speedups are closer than the noise floor (never without a floor)."""
    return floor is not None and b != 0 and abs(a / b - 1.0) <= floor


def floor_note(runs_df: pd.DataFrame) -> str | None:
    """The sentence that states the floor and where it comes from (None without A/A runs)."""
    floor = noise_floor(runs_df)
    if floor is None:
        return None
    return (
        f"{AA_NAME}: the AR baseline run as the method, against itself on the same prompts in "
        f"one run; how far it lands from 1.00× (offset or half its 95 % interval, the larger, "
        f"over its tasks) is this table's noise floor, ±{floor:.1%}. Speedups closer than the "
        "floor are ties: ≈ in the orderings, never an ordering."
    )


def machine_floor(aa_source: pd.DataFrame, runs_df: pd.DataFrame) -> float | None:
    """The noise floor that ``aa_source``'s A/A rows measured on the one machine ``runs_df`` ran
    on (a table without A/A rows of its own borrows them); None when ``runs_df`` spans machines
    or no A/A row ran on its machine."""
    if runs_df.empty or "hardware_id" not in runs_df:
        return None
    machines = set(runs_df["hardware_id"].dropna())
    aa = aa_rows(aa_source)
    if len(machines) != 1 or aa.empty or "hardware_id" not in aa:
        return None
    return noise_floor(aa[aa["hardware_id"].isin(machines)])


def ties_note(speedups: dict[str, float], floor: float | None, where: str) -> str | None:
    """The pairs of ``speedups`` (row name -> speedup) closer than ``floor``: ties, not an
    ordering (None without a floor or a tie). ``where`` names the column compared."""
    names = sorted(speedups, key=lambda name: -speedups[name])
    pairs = [
        f"{high} ≈ {low}"
        for i, high in enumerate(names)
        for low in names[i + 1 :]
        if tied(speedups[high], speedups[low], floor)
    ]
    if floor is None or not pairs:
        return None
    return (
        f"Ties ({where}, within this machine's noise floor ±{floor:.1%}, measured by the A/A "
        f"rows of the main table): {', '.join(pairs)}."
    )
