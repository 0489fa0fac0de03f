"""Rankings pooled over sittings: spreads, the A/A floor, ties, one machine kind."""

from __future__ import annotations

import pytest

from racer_bench.analysis import rankings
from racer_bench.errors import ConfigError
from racer_bench.record import folder as records


def summary(speedup: float, half: float, machine: str = "m1", **extra) -> dict:
    return {"speedup": speedup, "speedup_ci95": [speedup - half, speedup + half],
            "hardware": {"id": machine}, **extra}  # fmt: skip


def write_table(root, sittings: list[dict[str, dict]]) -> None:
    for i, cells in enumerate(sittings):
        for name, block in cells.items():
            (root / f"s{i}" / name).mkdir(parents=True)
            records.write_json(root / f"s{i}" / name / records.SUMMARY_FILE, block)


def test_spread_gives_within_and_between() -> None:
    block = rankings.spread([summary(1.2, 0.05), summary(1.4, 0.03)])
    assert block["speedup"] == pytest.approx(1.3)
    assert block["within"] == pytest.approx(0.04) and block["between"] == pytest.approx(0.1)


def test_the_floor_is_the_larger_aa_spread() -> None:
    aa = rankings.spread([summary(1.0, 0.02), summary(1.1, 0.02)])
    assert rankings.floor_of(aa) == pytest.approx(0.05)  # between (0.05) > within, |1.05-1|


def test_neighbours_closer_than_the_floor_tie() -> None:
    blocks = {"a": {"speedup": 1.50}, "b": {"speedup": 1.47}, "c": {"speedup": 1.20}}
    assert rankings.ordering(blocks, 0.05) == [["a", "b"], ["c"]]
    assert rankings.ordering(blocks, 0.01) == [["a"], ["b"], ["c"]]


def test_a_cell_that_moves_more_than_the_aa_between_sittings_ties_its_neighbour() -> None:
    blocks = {"a": {"speedup": 1.54, "between": 0.08}, "b": {"speedup": 1.43, "between": 0.12}}
    assert rankings.ordering(blocks, 0.05) == [["a", "b"]]


def test_a_table_pools_its_sittings_and_per_category(tmp_path) -> None:
    cat = {"qa": {"speedup": 1.3, "speedup_ci95": [1.2, 1.4]}}
    write_table(tmp_path, [
        {"ar": summary(1.0, 0.02, per_category={"qa": {"speedup": 1.0}}),
         "racer": summary(1.5, 0.05, per_category=cat), "pld": summary(1.3, 0.05)},
        {"ar": summary(1.02, 0.02), "racer": summary(1.6, 0.05), "pld": summary(1.35, 0.05)},
    ])  # fmt: skip
    ranked = rankings.rankings(tmp_path)
    assert ranked["sittings"] == 2
    assert ranked["overall"]["ordering"] == [["racer"], ["pld"]]
    assert "qa" in ranked["per_category"]
    assert "racer" in rankings.markdown(ranked)


def test_two_machine_kinds_are_refused(tmp_path) -> None:
    write_table(tmp_path, [{"ar": summary(1.0, 0.02, "m1")}, {"ar": summary(1.0, 0.02, "m2")}])
    with pytest.raises(ConfigError, match="machine kinds"):
        rankings.rankings(tmp_path)
