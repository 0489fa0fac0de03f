"""The noise floor from A/A runs, and ties in the orderings it implies."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from racer_bench.analysis import frames
from racer_bench.analysis.tables import build_tables
from racer_bench.analysis.tables.noise import AA_NAME, machine_floor, noise_floor, tied, ties_note
from racer_bench.analysis.tables.papers import ordering_note, rank_text
from tests.unit.test_frames import SPEC_CATEGORIES, write_run


def aa_frame(*runs: tuple[float, float, float]) -> pd.DataFrame:
    """A runs frame of A/A rows: (speedup, interval low, interval high) each."""
    return pd.DataFrame(
        [{"method": "ar", "variant": "", "lossless": True, "speedup": s, "speedup_ci_low": lo,
          "speedup_ci_high": hi} for s, lo, hi in runs]
    )  # fmt: skip


def test_the_floor_is_the_farthest_an_aa_run_lands_from_one() -> None:
    # offsets 0.01 and 0.04; half-widths 0.02 and 0.01: the floor is the largest, 0.04
    assert noise_floor(aa_frame((1.01, 0.99, 1.03), (0.96, 0.95, 0.97))) == pytest.approx(0.04)
    assert noise_floor(aa_frame((1.0, 0.97, 1.03))) == pytest.approx(0.03)  # interval only
    assert noise_floor(aa_frame()) is None


def test_two_speedups_inside_the_floor_are_a_tie() -> None:
    assert tied(1.50, 1.49, 0.02) and not tied(1.50, 1.40, 0.02)
    assert not tied(1.50, 1.49, None)  # no A/A run: no ties claimed


def test_a_table_without_aa_rows_borrows_the_floor_of_its_own_machine_only() -> None:
    aa = aa_frame((1.03, 1.0, 1.06)).assign(hardware_id="m1")
    ablation = pd.DataFrame({"hardware_id": ["m1", "m1"], "speedup": [1.5, 1.55]})
    assert machine_floor(aa, ablation) == pytest.approx(0.03)
    assert machine_floor(aa, ablation.assign(hardware_id="m2")) is None  # other machine
    assert machine_floor(aa, pd.DataFrame({"hardware_id": ["m1", "m2"]})) is None  # mixed


def test_ties_note_names_only_the_pairs_inside_the_floor() -> None:
    note = ties_note({"full": 1.49, "LRU off": 1.55, "logits only": 1.2}, 0.05, "speedup")
    assert note is not None and "LRU off ≈ full" in note and "logits only" not in note
    assert ties_note({"full": 1.49, "LRU off": 1.55}, 0.01, "speedup") is None  # apart
    assert ties_note({"full": 1.49, "LRU off": 1.50}, None, "speedup") is None  # no floor


def test_rankings_mark_ties_and_ordering_notes_ignore_swaps_inside_the_floor() -> None:
    assert rank_text({"A": 1.55, "B": 1.49, "C": 1.2}, "{:.2f}×", 0.05) == (
        "A 1.55× ≈ B 1.49× > C 1.20×"
    )
    ours, paper = {"A": 1.55, "B": 1.49}, {"A": 1.0, "B": 2.0}
    assert ordering_note("speedup", ours, paper, "racer", "{:.2f}×").endswith("A above B.")
    assert ordering_note("speedup", ours, paper, "racer", "{:.2f}×", 0.05).endswith(
        "the same order."
    )


def test_the_main_table_shows_the_aa_row_first_and_states_its_floor(tmp_path: Path) -> None:
    for i, method in enumerate(("ar", "pld", "racer")):
        write_run(tmp_path, method, method, "spec_bench", SPEC_CATEGORIES, 6, seed=i,
                  accept=0.0 if method == "ar" else 1.0)  # fmt: skip
    built = {t.key: t for t in build_tables(frames.load_runs(tmp_path))}
    main = built["main"]
    assert [row[0] for row in main.rows] == [AA_NAME, "PLD", "RACER"]
    assert any(note.startswith(f"{AA_NAME}: ") and "noise floor, ±" in note for note in main.notes)
    assert built["speed"].rows[0][0] == AA_NAME
