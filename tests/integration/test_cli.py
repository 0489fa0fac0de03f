"""Bad input gets one line naming the key and what is allowed, and exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from racer_bench.cli import check_group_choices
from racer_bench.errors import ConfigError
from tests.conftest import REPO

TINY = ["model=tiny_random", "task=tiny", "task.limit=1", "max_new_tokens=4", "warmup_prompts=0",
        "num_threads=1"]  # fmt: skip


def cli(*args: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "racer_bench", *args, f"hydra.run.dir={tmp_path}"],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )  # fmt: skip


def test_unknown_group_choice_lists_valid_names():
    with pytest.raises(ConfigError, match=r"method=nope: unknown method; choose one of: .*pld"):
        check_group_choices(["method=nope"])
    check_group_choices(["method=pld", "task=tiny", "method.capacity=3", "seed=1"])
    check_group_choices(["method=ar,pld"])  # multirun lists
    with pytest.raises(ConfigError, match="task=bogus"):
        check_group_choices(["task=tiny,bogus"])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["method=nope"], "method=nope: unknown method"),
        (["method=racer", "method.capacity=-1"], "method.capacity=-1: must be an integer >= 1"),
        (["verifier=asd", "verifier.budget=-3"], "verifier.budget=-3: must be a number >= 0"),
        (["verifier=sampling", "verifier.temperature=-1"], "verifier.temperature=-1: must be"),
        (["num_threads=0"], "num_threads=0: must be an integer >= 1 or null"),
        (["scheduler=nope"], "scheduler=nope: unknown scheduler"),
        (["scheduler=confidence", "scheduler.profile=wobbly"], "scheduler.profile=wobbly: allowed"),
    ],
)
def test_cli_bad_values_exit_2_with_one_line(overrides, message, tmp_path):
    """Found by hand: a negative capacity ran silently as AR; a negative ASD budget or
    temperature ended in Hydra's instantiate traceback with status 1."""
    proc = cli(*TINY, *overrides, tmp_path=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {message}"), proc.stderr
    assert not (tmp_path / "manifest.json").exists()  # refused before anything loaded


def test_cli_missing_local_model_folder(tmp_path):
    proc = cli("model=hf", f"model.path={tmp_path}/missing", "task=tiny", tmp_path=tmp_path)
    assert proc.returncode == 2
    assert "model.path=" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_runs_and_prints_run_folder(tmp_path):
    proc = cli(*TINY, "method=pld", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"run folder: {tmp_path}" in proc.stdout
    assert (tmp_path / "summary.json").exists()
    # a fresh process: its imports and Hydra's composition are part of its start
    started = json.loads((tmp_path / "summary.json").read_text())["startup"]
    assert started["phases"]["imports_and_config"] > 0.5 and started["ready_s"] > 1.0
    assert f"start-up: {started['ready_s']:.1f} s to the first prompt (" in proc.stdout
