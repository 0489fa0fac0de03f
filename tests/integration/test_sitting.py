"""One sitting: every contender of a table in one process, sharing the AR baseline, each cell
written as an ordinary run folder, with an A/A cell added per group."""

from __future__ import annotations

import pytest

from racer_bench.analysis.runs import load_runs
from racer_bench.errors import ConfigError
from racer_bench.record import folder as records
from racer_bench.run.sitting import AA_CELL, SittingCell, run_sitting

BASE = ("debug=cpu_tiny", "task=tiny", "task.limit=3", "max_new_tokens=16")
CELLS = [SittingCell("pld", (*BASE, "method=pld")),
         SittingCell("sps", (*BASE, "method=sps"))]  # fmt: skip


@pytest.fixture(scope="module")
def sitting(tmp_path_factory):
    out = tmp_path_factory.mktemp("sitting")
    return out, run_sitting(CELLS, out)


def test_every_cell_and_the_aa_cell_get_a_run_folder(sitting) -> None:
    out, summaries = sitting
    assert set(summaries) == {"pld", "sps", AA_CELL}
    for name in summaries:
        assert (out / name / records.SUMMARY_FILE).exists()
        assert records.read_json(out / name / records.MANIFEST_FILE)["sitting"] == [
            AA_CELL, "pld", "sps"]  # fmt: skip


def test_the_cells_share_one_baseline_run_per_prompt(sitting) -> None:
    out, _ = sitting
    lines = {name: records.load_prompts(out / name) for name in ("pld", "sps", AA_CELL)}
    ids = [r["id"] for r in lines["pld"]]
    assert ids and all([r["id"] for r in rows] == ids for rows in lines.values())
    for rows in zip(*lines.values(), strict=True):
        assert all(r["status"] == "ok" for r in rows)
        assert rows[0]["baseline"] == rows[1]["baseline"] == rows[2]["baseline"]


def test_every_contender_stays_lossless_and_aa_is_ar(sitting) -> None:
    out, summaries = sitting
    assert all(s["identical"] == 1.0 for s in summaries.values())
    assert summaries[AA_CELL]["mat"] == 1.0
    runs = load_runs(out)
    assert {r.manifest["method"] for r in runs} >= {"pld", "sps", "ar"}


def test_a_stopped_sitting_resumes_without_redoing_prompts(sitting) -> None:
    out, _ = sitting
    before = {n: len(records.load_prompts(out / n)) for n in ("pld", "sps", AA_CELL)}
    run_sitting(CELLS, out)
    assert {n: len(records.load_prompts(out / n)) for n in before} == before


def test_a_lossy_contender_is_refused(tmp_path) -> None:
    cells = [SittingCell("asd", (*BASE, "method=pld", "verifier=asd"))]
    with pytest.raises(ConfigError, match="lossy"):
        run_sitting(cells, tmp_path)


def test_cells_on_other_tasks_run_as_separate_groups(tmp_path) -> None:
    cells = [SittingCell("pld_a", (*BASE, "method=pld")),
             SittingCell("pld_b", (*BASE, "method=pld", "task.limit=2"))]  # fmt: skip
    summaries = run_sitting(cells, tmp_path)
    assert {"pld_a", "pld_b"} <= set(summaries)
    assert len([n for n in summaries if n.startswith(AA_CELL)]) == 2
