"""``python -m racer_bench.reproduce``: cells of a table, their state, the one-machine rule,
the command of each cell and the wall-time record; nothing here runs a benchmark."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from racer_bench import reproduce
from racer_bench.analysis import records
from tests.conftest import CONF_DIR


def write_experiment(conf: Path, name: str, params: str) -> None:
    (conf / "experiment").mkdir(parents=True, exist_ok=True)
    (conf / "experiment" / f"{name}.yaml").write_text(
        f"# @package _global_\nhydra:\n  sweeper:\n    params:\n{params}"
    )


def test_the_cells_of_an_experiment_are_its_sweep(tmp_path: Path) -> None:
    write_experiment(tmp_path, "t", "      task: humaneval,gsm8k\n      method: ar,pld\n")
    cells = reproduce.cells_of("t", tmp_path)
    assert [c.name for c in cells] == ["ar_humaneval", "pld_humaneval", "ar_gsm8k", "pld_gsm8k"]
    assert cells[1].overrides == ("experiment=t", "hydra.mode=RUN", "task=humaneval", "method=pld")


def test_the_curated_tables_have_cells() -> None:
    main = [c.name for c in reproduce.cells_of("racer_main", CONF_DIR)]
    assert "ar_humaneval" in main and "racer_spec_bench" in main and "sam_mgsm_zh" in main
    assert reproduce.cells_of("racer_ablation", CONF_DIR)[0].name == "full"
    assert reproduce.cells_of("readme_main", CONF_DIR)[0].overrides[0] == "method=racer"


def test_an_unknown_table_is_one_line_naming_the_choices(tmp_path: Path) -> None:
    write_experiment(tmp_path, "t", "      method: ar\n")
    with pytest.raises(SystemExit, match=r"table 'x' unknown; choose one of: .*readme_main.*t"):
        reproduce.cells_of("x", tmp_path)


def run_folder(path: Path, machine: str, finished: bool) -> Path:
    path.mkdir(parents=True)
    records.write_json(path / records.MANIFEST_FILE, {"hardware": {"id": machine}})
    if finished:
        records.write_json(path / records.SUMMARY_FILE, {})
    else:
        (path / records.INCOMPLETE_FILE).write_text("")
    return path


def test_cells_are_new_partial_or_done_and_resumed_when_partial(tmp_path: Path) -> None:
    cell = reproduce.Cell("c", ("method=pld",))
    assert reproduce.state_of(tmp_path / "none") == "new"
    assert reproduce.command(cell, tmp_path / "none")[-1] == f"hydra.run.dir={tmp_path / 'none'}"
    partial = run_folder(tmp_path / "p", "m1", finished=False)
    assert reproduce.state_of(partial) == "partial"
    assert reproduce.command(cell, partial) == [
        sys.executable,
        "-m",
        "racer_bench",
        f"resume={partial}",
    ]
    assert reproduce.state_of(run_folder(tmp_path / "d", "m1", finished=True)) == "done"


def test_a_table_holds_one_machine(tmp_path: Path) -> None:
    here = run_folder(tmp_path / "a", "m1", finished=True)
    there = run_folder(tmp_path / "b", "m2", finished=False)
    reproduce.check_machine([here, tmp_path / "new"], "m1")
    with pytest.raises(SystemExit, match="was made on machine m2, this is m1"):
        reproduce.check_machine([here, there], "m1")


def test_wall_times_add_up_over_sittings(tmp_path: Path) -> None:
    reproduce.record_walls(tmp_path, {"a": 10.0}, "sha1")
    record = reproduce.record_walls(tmp_path, {"a": 5.0, "b": 1.0}, "sha2")
    assert record["cells"] == {"a": 15.0, "b": 1.0} and record["wall_s"] == 16.0
    assert record["commits"] == ["sha1", "sha2"]
    assert json.loads((tmp_path / "reproduce.json").read_text()) == record


def test_a_dirty_tree_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records, "git_state", lambda repo: {"git_sha": "abc", "git_dirty": True})
    with pytest.raises(SystemExit, match="uncommitted changes"):
        reproduce.check_clean(tmp_path)
    monkeypatch.setattr(records, "git_state", lambda repo: {"git_sha": "abc", "git_dirty": False})
    assert reproduce.check_clean(tmp_path) == "abc"


def test_cells_run_this_checkouts_code_first(monkeypatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    paths = reproduce.cell_env()["PYTHONPATH"].split(os.pathsep)
    assert paths == [str(reproduce.REPO_ROOT), "/elsewhere"]
