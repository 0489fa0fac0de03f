"""Cell formatting shared by the tables: numbers or a dash, ``speedup (MAT)`` cells."""

from __future__ import annotations

import math

import pandas as pd

DASH = "–"


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
