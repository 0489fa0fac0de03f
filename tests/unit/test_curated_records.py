"""Committed records name no machine, and scripts/curate.py is what keeps it so."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.scripts import load_script

MACHINE_PATH = re.compile(r"(?<![\w.:/~])/(?:root|home|Users|work|check|tmp|mnt|scratch)/")


def test_no_curated_record_names_a_machine_path() -> None:
    files = [p for p in (REPO / "results/curated").rglob("*") if p.is_file()]
    assert files
    offenders = [
        str(p.relative_to(REPO))
        for p in files
        if MACHINE_PATH.search(p.read_text(encoding="utf-8", errors="replace"))
    ]
    assert offenders == []


def make_run(folder: Path, data_dir: str) -> Path:
    (folder / ".hydra").mkdir(parents=True)
    manifest = {"config": {"paths": {"data_dir": data_dir}, "cache": str(Path.home() / ".c")}}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "summary.json").write_text(json.dumps({"out": str(REPO / "results/x")}))
    (folder / "prompts.jsonl").write_text('{"id": 1}\n')
    (folder / ".hydra/hydra.yaml").write_text(f"cwd: {REPO}\ndata: {data_dir}/gsm8k\n")
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


CURATED_RUNS = [
    p.parent for p in sorted((REPO / "results/curated").rglob("summary.json"))
    if (p.parent / "prompts.jsonl").exists()
]  # fmt: skip


@pytest.mark.parametrize("run_dir", CURATED_RUNS, ids=lambda p: str(p.relative_to(REPO)))
def test_a_curated_summary_is_what_todays_metrics_make_of_its_prompts(run_dir: Path) -> None:
    """A metric fixed after a run was curated leaves its summary stale: rewrite it with
    ``python -m racer_bench.analysis.resummarize results/curated``."""
    from racer_bench.analysis.resummarize import stale_keys

    assert stale_keys(run_dir) == []


def test_resummarize_rewrites_only_stale_numbers(tmp_path) -> None:
    from racer_bench.analysis.resummarize import resummarize, stale_keys

    run_dir = tmp_path / "run"
    shutil.copytree(CURATED_RUNS[0], run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["mat"] += 1.0
    summary["load"] = {"alone": True}  # not recomputed: kept
    (run_dir / "summary.json").write_text(json.dumps(summary))
    assert stale_keys(run_dir) == ["mat"]
    assert resummarize(run_dir) == ["mat"]
    assert stale_keys(run_dir) == []
    rewritten = json.loads((run_dir / "summary.json").read_text())
    assert rewritten["mat"] == pytest.approx(summary["mat"] - 1.0)
    assert rewritten["load"] == {"alone": True}


def test_curate_replaces_the_run_folder_and_the_checkout_it_was_started_from(tmp_path) -> None:
    """A run made in another checkout, into a folder outside this one, names neither."""
    curate = load_script("curate")
    other = tmp_path / "tmp/other_checkout"
    run = make_run(tmp_path / "tmp/runs/pld_humaneval", "/data")
    (run / ".hydra/hydra.yaml").write_text(
        f"hydra:\n  run:\n    dir: {run}\n  runtime:\n    cwd: {other}\n"
        f"    config_sources:\n    - path: {other}/conf\n"
    )
    (run / "summary.json").write_text(json.dumps({"run_dir": str(run)}))
    [dest] = curate.main([str(run), "--name", "exp", "--curated", str(tmp_path / "curated")])
    text = "".join(p.read_text() for p in dest.rglob("*") if p.is_file())
    assert str(tmp_path) not in text
    assert '"run_dir": "pld_humaneval"' in (dest / "summary.json").read_text()
    assert "path: ./conf" in (dest / ".hydra/hydra.yaml").read_text()


def curated_runs() -> list[Path]:
    return sorted(p.parent for p in (REPO / "results/curated").rglob("manifest.json"))


def test_every_curated_run_names_a_clean_commit_its_machine_and_its_load() -> None:
    """Provenance of every curated record: made from a committed tree (the sha is in the
    history, nothing uncommitted), on a fingerprinted machine, with the load it ran under."""
    import subprocess

    runs = curated_runs()
    assert runs
    problems = []
    for run in runs:
        manifest = json.loads((run / "manifest.json").read_text())
        summary = json.loads((run / "summary.json").read_text())
        sha = manifest.get("git_sha")
        known = sha and subprocess.run(["git", "cat-file", "-e", f"{sha}^{{commit}}"], cwd=REPO,
                                       capture_output=True).returncode == 0  # fmt: skip
        if manifest.get("git_dirty") is not False or not known:
            dirty = manifest.get("git_dirty")
            problems.append(f"{run.relative_to(REPO)}: sha {sha}, dirty {dirty}")
        if not (manifest.get("hardware") or {}).get("id"):
            problems.append(f"{run.relative_to(REPO)}: no hardware fingerprint")
        if "load" not in summary and "load" not in manifest:
            problems.append(f"{run.relative_to(REPO)}: no load record")
    assert problems == []


def test_curate_keeps_a_serving_sweeps_load_generator_results_but_not_server_logs(
    tmp_path,
) -> None:
    from racer_bench.analysis.curation import curate

    run = tmp_path / "run"
    (run / "serve").mkdir(parents=True)
    for name in ("summary.json", "manifest.json"):
        (run / name).write_text("{}")
    (run / "serve/c1_method.json").write_text(json.dumps({"path": str(run / "serve")}))
    (run / "serve/prompts_served.jsonl").write_text('{"prompt": "p"}\n')
    (run / "serve/server_method.log").write_text("log\n")
    dest = curate(run, tmp_path / "curated")
    assert (dest / "serve/c1_method.json").exists()
    assert (dest / "serve/prompts_served.jsonl").exists()
    assert not (dest / "serve/server_method.log").exists()
    assert str(tmp_path) not in (dest / "serve/c1_method.json").read_text()


def test_each_curated_table_was_made_on_one_machine() -> None:
    """A table's runs share one hardware fingerprint (reproduce refuses to mix machines)."""
    machines: dict[str, set[str]] = {}
    for run in curated_runs():
        table = run.relative_to(REPO / "results/curated").parts[0]
        hardware = json.loads((run / "manifest.json").read_text()).get("hardware") or {}
        machines.setdefault(table, set()).add(str(hardware.get("id")))
    assert {t: ids for t, ids in machines.items() if len(ids) > 1} == {}
