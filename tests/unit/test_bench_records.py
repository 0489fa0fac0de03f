"""scripts/sittings_record.py and scripts/table_record.py on hand-made run folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.scripts import load_script

MACHINE = {"id": "m1", "label": "a test machine"}


def write_cell(folder: Path, summary: dict, choices: dict, sha: str = "a" * 40,
               dirty: bool = False, machine: dict = MACHINE) -> None:  # fmt: skip
    folder.mkdir(parents=True)
    manifest = {"git_sha": sha, "git_dirty": dirty, "hardware": machine, "choices": choices}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    base = {"hardware": machine, "load": {"alone": True, "others_share": 0.01, "wall_s": 9.0}}
    (folder / "summary.json").write_text(json.dumps(base | summary))


def speed(speedup: float, tokens: float = 100.0) -> dict:
    return {"speedup": speedup, "speedup_ci95": [speedup - 0.1, speedup + 0.1], "mat": 1.5,
            "tokens_per_s": tokens * speedup, "baseline_tokens_per_s": tokens,
            "identical": 1.0, "n_prompts": 4, "ar_step_ms": 10.0}  # fmt: skip


def test_a_sittings_record_pools_its_sittings_and_keeps_the_followed_cost(tmp_path) -> None:
    script = load_script("sittings_record")
    followed = {"method": {"cost": {"16": 1.9}, "profile_cost": {"16": 2.4}}}
    for i, (ar, racer) in enumerate([(1.0, 1.3), (0.98, 1.4), (1.02, 1.35)]):
        write_cell(tmp_path / f"s{i}" / "ar", speed(ar), {"method": "ar"})
        write_cell(tmp_path / f"s{i}" / "racer", speed(racer) | {"cost_followed": followed},
                   {"method": "racer"})  # fmt: skip
    data = script.record(tmp_path, "cmd")
    assert data["git_sha"] == "a" * 40 and list(data["sittings"]) == ["s0", "s1", "s2"]
    assert data["sittings"]["s1"]["cells"]["racer"]["cost16_followed"] == 1.9
    assert data["rankings"]["overall"]["cells"]["racer"]["speedup"] == pytest.approx(1.35)
    page = script.markdown(data, "title")
    assert "| s1 | racer | 1.400x |" in page and "1.90 / 2.40" in page


def test_a_table_record_keeps_each_cell_and_its_llamacpp_reference(tmp_path) -> None:
    script = load_script("table_record")
    ours = speed(1.3) | {"llamacpp_tokens_per_s": 70.0, "llamacpp_identical": 0.25}
    write_cell(
        tmp_path / "ours" / "racer_humaneval", ours, {"method": "racer", "task": "humaneval"}
    )
    write_cell(tmp_path / "inside" / "pld_humaneval", speed(0.5),
               {"method": "pld", "task": "humaneval", "backend": "llamacpp"})  # fmt: skip
    data = script.record([tmp_path / "ours", tmp_path / "inside"], "cmd")
    assert set(data["cells"]) == {"ours/racer_humaneval", "inside/pld_humaneval"}
    page = script.markdown(data, "title")
    assert "| humaneval | native | racer | 100.0 | 130.0 | 1.30x (1.20-1.40) |" in page
    assert "| 4/4 | 70.0 (1/4) | True |" in page
    assert "| humaneval | llamacpp | pld |" in page


@pytest.mark.parametrize("bad", [{"dirty": True}, {"machine": {"id": "m2"}}])
def test_a_table_record_refuses_dirty_cells_and_two_machines(tmp_path, bad) -> None:
    script = load_script("table_record")
    write_cell(tmp_path / "t" / "one", speed(1.2), {"method": "pld"})
    write_cell(tmp_path / "t" / "two", speed(1.1), {"method": "racer"}, **bad)
    with pytest.raises(SystemExit, match="error:"):
        script.record([tmp_path / "t"], "cmd")


def test_a_table_remade_in_part_names_each_cells_commit(tmp_path) -> None:
    script = load_script("table_record")
    write_cell(tmp_path / "t" / "one", speed(1.2), {"method": "pld"})
    write_cell(tmp_path / "t" / "two", speed(1.1), {"method": "racer"}, sha="b" * 40)
    data = script.record([tmp_path / "t"], "cmd")
    assert data["git_shas"] == ["a" * 40, "b" * 40] and data["cells"]["t/two"]["git_sha"][0] == "b"
    assert "(commits aaaaaaa, bbbbbbb, each clean" in script.markdown(data, "title")


@pytest.mark.parametrize("bad", [{"dirty": True}, {"sha": "b" * 40}, {"machine": {"id": "m2"}}])
def test_a_sittings_record_refuses_dirty_mixed_commits_and_machines(tmp_path, bad) -> None:
    script = load_script("sittings_record")
    write_cell(tmp_path / "s0" / "ar", speed(1.0), {"method": "ar"})
    write_cell(tmp_path / "s1" / "ar", speed(1.0), {"method": "ar"}, **bad)
    with pytest.raises((SystemExit, Exception), match=r"error:|machine kinds"):
        script.record(tmp_path, "cmd")
