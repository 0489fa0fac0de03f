"""Committed records name no machine, and scripts/curate.py is what keeps it so."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
MACHINE_PATH = re.compile(r"(?<![\w.:/~])/(?:root|home|Users|work|check|tmp|mnt|scratch)/")


def test_no_curated_record_names_a_machine_path() -> None:
    files = [p for p in (ROOT / "results/curated").rglob("*") if p.is_file()]
    assert files
    offenders = [
        str(p.relative_to(ROOT))
        for p in files
        if MACHINE_PATH.search(p.read_text(encoding="utf-8", errors="replace"))
    ]
    assert offenders == []


def make_run(folder: Path, data_dir: str) -> Path:
    (folder / ".hydra").mkdir(parents=True)
    manifest = {"config": {"paths": {"data_dir": data_dir}, "cache": str(Path.home() / ".c")}}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "summary.json").write_text(json.dumps({"out": str(ROOT / "results/x")}))
    (folder / "prompts.jsonl").write_text('{"id": 1}\n')
    (folder / ".hydra/hydra.yaml").write_text(f"cwd: {ROOT}\ndata: {data_dir}/gsm8k\n")
    return folder


def test_curate_copies_the_records_without_machine_paths(tmp_path) -> None:
    curate = load_script("curate")
    run = make_run(tmp_path / "runs/2026-12-01_07-00-00", "/scratch/me/datasets")
    (run / "big.bin").write_bytes(b"\0" * 10)  # not a record: left behind
    [dest] = curate.main([str(run), "--name", "exp", "--curated", str(tmp_path / "curated")])
    assert dest == tmp_path / "curated/exp/2026-12-01_07-00-00"
    assert sorted(p.name for p in dest.rglob("*") if p.is_file()) == [
        "hydra.yaml", "manifest.json", "prompts.jsonl", "summary.json"]  # fmt: skip
    text = "".join(p.read_text() for p in dest.rglob("*") if p.is_file())
    assert not MACHINE_PATH.search(text)
    assert "<data_dir>/gsm8k" in text and "cwd: ." in text and '"~/.c"' in text


def test_curate_refuses_an_unfinished_run(tmp_path) -> None:
    curate = load_script("curate")
    run = make_run(tmp_path / "run", "/data")
    (run / "INCOMPLETE").write_text("")
    with pytest.raises(SystemExit, match="not a finished run"):
        curate.main([str(run), "--name", "exp", "--curated", str(tmp_path / "curated")])
