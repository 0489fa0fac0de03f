"""Bad input gets one line naming the key and what is allowed, and exit status 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from racer_bench.cli import check_group_choices
from racer_bench.errors import ConfigError
from tests.conftest import REPO

TINY = ["model=tiny_random", "task=tiny", "task.limit=1", "max_new_tokens=4", "warmup_prompts=0"]


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
    ("override", "message"),
    [
        ("method=nope", "method=nope: unknown method"),
        ("max_new_tokens=0", "max_new_tokens=0: must be a positive integer"),
        ("task.limit=-1", "task.limit=-1"),
        ("baseline=maybe", "baseline=maybe: allowed values are same_run, none"),
        ("hardware=tpu", "hardware=tpu: allowed values are cpu, gpu"),
        ("scheduler=nope", "scheduler=nope: unknown scheduler"),
        ("scheduler=confidence scheduler.profile=wobbly", "scheduler.profile=wobbly: allowed"),
    ],
)
def test_cli_bad_values_exit_2_with_one_line(override, message, tmp_path):
    proc = cli(*TINY, *override.split(), tmp_path=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    assert lines[-1].startswith("error: ") and message in lines[-1]
    assert "Traceback" not in proc.stderr


def test_cli_missing_local_model_folder(tmp_path):
    proc = cli("model=hf", f"model.path={tmp_path}/missing", "task=tiny", tmp_path=tmp_path)
    assert proc.returncode == 2
    assert "model.path=" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_runs_and_prints_run_folder(tmp_path):
    proc = cli(*TINY, "method=pld", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"run folder: {tmp_path}" in proc.stdout
    assert (tmp_path / "summary.json").exists()
