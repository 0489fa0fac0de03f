"""scripts/train_drafter.py on the tiny model: loss falls, checkpoint loads, resume continues."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from methods.dspark import DSparkDrafter
from methods.eagle3 import Eagle3Drafter
from methods.medusa import MedusaDrafter
from racer_bench.train import clock as clock_module
from racer_bench.train.distill_data import read_cache
from tests.conftest import REPO, TINY_PROMPTS, ar_tokens, run_generate

DRAFTERS = {"medusa": MedusaDrafter, "eagle3": Eagle3Drafter, "dspark": DSparkDrafter}
SOURCES = ["data.sources.code=4", "data.sources.mbpp=0", "data.sources.chat=2",
           "data.sources.math=1"]  # fmt: skip


def run_script(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    args = [
        sys.executable, str(REPO / "scripts" / "train_drafter.py"), "model=tiny_random",
        "model_name=tiny", *SOURCES, "data.max_new_tokens=16", "data.batch_size=3",
        "data.holdout=0.3", "train.save_every=10", "train.log_every=10", "train.eval_every=10",
        "train.lr=3e-3", "head.attn_heads=4", "head.intermediate_size=64", "head.anchors=8",
        "head.markov_rank=8", "head.block_layers=1", f"hydra.run.dir={tmp_path / 'hydra'}",
        *overrides,
    ]  # fmt: skip
    env = {**os.environ, "RACER_BENCH_CACHE": str(tmp_path), "OMP_NUM_THREADS": "1"}
    return subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


def train(tmp_path: Path, kind: str, steps: int) -> dict:
    done = run_script(tmp_path, f"kind={kind}", f"train.max_steps={steps}")
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((tmp_path / "drafters" / "tiny" / f"{kind}.json").read_text())


@pytest.mark.parametrize("kind", ["medusa", "eagle3", "dspark"])
def test_training_lowers_the_loss_and_the_head_drafts(tmp_path, kind, tiny_target) -> None:
    summary = train(tmp_path, kind, steps=40)
    assert summary["steps"] == 40 and summary["resumed_from"] == 0
    assert summary["sequences"] + summary["held_out_sequences"] == 7  # 3 of 7 held out
    assert summary["held_out_sequences"] == 3
    curve = summary["loss_curve"]
    assert len(curve) == 10  # mean loss of each tenth of the run
    assert sum(curve[-3:]) / 3 < sum(curve[:3]) / 3
    folder = tmp_path / "drafters" / "tiny"
    assert len(read_cache(folder / "distill.jsonl")) == 7
    assert len(list((folder / "features").rglob("*.pt"))) == 7  # reused by later runs
    rows = (folder / f"{kind}.losses.csv").read_text().splitlines()
    assert len(rows) == 41 and rows[0].startswith("step,time_s,loss")
    assert (folder / f"{kind}.loss.png").stat().st_size > 0
    assert [e["step"] for e in summary["eval_curve"]] == [10, 20, 30, 40]
    accuracy = summary["depth1_accuracy"]  # held-out, teacher-forced, comparable across kinds
    assert 0.0 <= accuracy["acc1"] <= accuracy["acc4"] <= 1.0
    assert accuracy == {k: summary["eval_curve"][-1][k] for k in ("acc1", "acc4")}
    checkpoint = folder / f"{kind}.pt"
    drafter = DRAFTERS[kind](260, checkpoint=str(checkpoint))
    prompt = list(TINY_PROMPTS[0])
    result = run_generate(tiny_target, drafter, prompt, max_new_tokens=24)
    assert result.tokens == ar_tokens(tiny_target, prompt, max_new_tokens=24)
    if kind == "dspark":  # confidence temperatures fitted on the held-out sequences, saved
        cal = summary["calibration"]
        assert cal["calibrated"] and cal["blocks"] > 0 and len(cal["temperatures"]) == 4
        assert cal["ece_survival_after"][0] <= cal["ece_survival_before"][0] + 1e-9
        saved = drafter.head.conf_temperature.tolist()
        assert saved == pytest.approx(cal["temperatures"])
        assert result.steps[0].meta["predicted_accepted"] >= 0
    resumed = train(tmp_path, kind, steps=50)  # continues from the saved state
    assert resumed["steps"] == 50 and resumed["resumed_from"] == 40
    assert resumed["train_s"] > summary["train_s"]  # the time cap counts both runs
    assert len((folder / f"{kind}.losses.csv").read_text().splitlines()) == 51


def test_data_only_builds_the_cache_and_bad_keys_exit_2(tmp_path) -> None:
    done = run_script(tmp_path, "data_only=true")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["generated"] == 7
    assert not (tmp_path / "drafters" / "tiny" / "medusa.pt").exists()
    bad = run_script(tmp_path, "kind=lstm")
    assert bad.returncode == 2 and "kind=lstm" in bad.stderr
    bad = run_script(tmp_path, "data_only=true", "+data.sources.wiki=3")
    assert bad.returncode == 2 and "data.sources.wiki" in bad.stderr


def test_features_only_stores_every_heads_features_in_one_pass(tmp_path) -> None:
    """One forward per sequence stores Medusa's and EAGLE-3/DSpark's features; a head trained
    afterwards reads them instead of recomputing."""
    done = run_script(tmp_path, "features_only=true")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["features_computed"] == 7
    folder = tmp_path / "drafters" / "tiny" / "features"
    sets = sorted(p.name for p in folder.iterdir())
    assert len(sets) == 2 and "layers_final" in sets
    files = {f: f.stat().st_mtime_ns for f in folder.rglob("*.pt")}
    assert len(files) == 14
    assert run_script(tmp_path, "kind=dspark", "train.max_steps=2").returncode == 0
    assert {f: f.stat().st_mtime_ns for f in folder.rglob("*.pt")} == files
    again = run_script(tmp_path, "features_only=true")
    assert json.loads(again.stdout.strip().splitlines()[-1])["features_computed"] == 0


def test_resume_refuses_a_state_from_other_data(tmp_path) -> None:
    assert run_script(tmp_path, "kind=medusa", "train.max_steps=10").returncode == 0
    other = run_script(tmp_path, "kind=medusa", "train.max_steps=20", "data.sources.code=3")
    assert other.returncode == 2 and "trained with other data" in other.stderr


def test_active_clock_leaves_out_a_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step stretched by a SIGSTOP counts as a typical step, not as the pause."""
    now = iter([0.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0, 5.0, 5.0, 505.0, 505.0, 506.5])
    monkeypatch.setattr(clock_module.time, "perf_counter", lambda: next(now))
    clock = clock_module.ActiveClock(10.0)
    counted = []
    for _ in range(7):
        clock.start()
        counted.append(clock.stop())
    assert counted == [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.5]
    assert clock.seconds == pytest.approx(17.5)
