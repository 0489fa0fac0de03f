"""The papers' reported numbers (``racer_bench/analysis/data/paper_numbers.yaml``) as table
cells, and how our ranking of methods compares with a paper's."""

from __future__ import annotations

import pandas as pd

from racer_bench.analysis import names, paper_numbers
from racer_bench.analysis.tables.cells import DASH
from racer_bench.analysis.tables.noise import tied

RACER_SPEC_BENCH = paper_numbers.table("racer_spec_bench")
SPEC_BENCH_LEADERBOARD = paper_numbers.table("spec_bench_leaderboard")
RACER_ABLATION_MAT = paper_numbers.table("racer_ablation_mat")
LOGITSPEC_HEADLINE = paper_numbers.table("logitspec_headline")
ASD_REPORTED = paper_numbers.table("asd_reported")
ASD_FROZEN = paper_numbers.table("asd_frozen")


def reported(numbers: dict[str, paper_numbers.Reported] | None) -> str:
    """A paper's ``speedup (MAT)`` cell from its reported numbers."""
    if not numbers:
        return DASH
    cell = numbers["speedup"].text if "speedup" in numbers else DASH
    return f"{cell} ({numbers['mat'].text})" if "mat" in numbers else cell


def rank_text(values: dict[str, float], pattern: str, floor: float | None = None) -> str:
    """``"RACER 1.74× > PLD 1.57× ≈ REST 1.56×"``: names by decreasing value; neighbours
    closer than the noise ``floor`` are joined by ≈ (a tie), others by >."""
    ranked = sorted(values.items(), key=lambda item: -item[1])
    text = ""
    for i, (name, value) in enumerate(ranked):
        if i:
            text += " ≈ " if tied(ranked[i - 1][1], value, floor) else " > "
        text += f"{name} {pattern.format(value)}"
    return text


def ordering_note(
    what: str,
    ours: dict[str, float],
    reference: dict[str, float],
    source: str,
    pattern: str,
    floor: float | None = None,
) -> str | None:
    """One sentence comparing our ranking by ``what`` with a paper's, over the names both have.

    Pairs ordered the other way round are named (``"PLD above Token Recycling"``), unless ours
    are a tie inside the noise ``floor``; None when fewer than two names are shared."""
    shared = [name for name in ours if name in reference]
    if len(shared) < 2:
        return None
    by_ours = sorted(shared, key=lambda name: -ours[name])
    swapped = [
        f"{high} above {low}"
        for i, high in enumerate(by_ours)
        for low in by_ours[i + 1 :]
        if ours[high] > ours[low]
        and reference[high] < reference[low]
        and not tied(ours[high], ours[low], floor)
    ]
    verdict = (
        "the same order" if not swapped else "a different order: ours has " + ", ".join(swapped)
    )
    theirs = rank_text({n: reference[n] for n in shared}, pattern)
    return (
        f"Ordering by {what}: ours {rank_text({n: ours[n] for n in shared}, pattern, floor)}; "
        f"{paper_numbers.column(source)} {theirs}: {verdict}."
    )


def spec_bench_speedups(df: pd.DataFrame) -> dict[str, float]:
    """``{method label: Spec-Bench overall speedup}`` of a runs frame."""
    spec = df[df["task"] == "spec_bench"].dropna(subset=["speedup"])
    return {names.method_name(m): float(v) for m, v in spec[["method", "speedup"]].values}


def reported_values(
    numbers: dict[str, dict[str, paper_numbers.Reported]], key: str
) -> dict[str, float]:
    """``{method label: value}`` of one reported metric, where the paper gives a number."""
    return {
        names.method_name(method): cell[key].value
        for method, cell in numbers.items()
        if key in cell and cell[key].value is not None
    }
