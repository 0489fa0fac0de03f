"""Every task key is checked before the model loads (:func:`racer_bench.run.config.validate`).

Found by hand: ``task=humaneval task.limit=0`` loaded the model, ran nothing and crashed in the
summary (``cannot convert float NaN to integer``); ``task=spec_bench task.categories=[nope]``
was refused only once the model had loaded, leaving a manifest in the run folder. Here the model
loader is replaced by one that fails loudly, so a check that comes too late shows.
"""

from __future__ import annotations

import functools
import subprocess
import sys

import pytest

from racer_bench.errors import ConfigError
from racer_bench.models import loaders
from racer_bench.run.grid import build_grid
from racer_bench.run.runner import run
from tests.conftest import REPO

TINY = ["model=tiny_random", "max_new_tokens=4", "warmup_prompts=0", "num_threads=1"]
LOADED = "the model loader was called"
# the CLI with the tiny model's loader replaced (python -c <this> <overrides>)
# (its signature kept: the schema check reads the model's keys from it)
PATCHED_CLI = f"""
import functools, sys
import racer_bench.models.loaders as loaders
@functools.wraps(loaders.tiny_random)
def refuse(*args, **kwargs):
    raise SystemExit({LOADED!r})
loaders.tiny_random = refuse
from racer_bench.cli import main
sys.argv[0] = "racer_bench"
main()
"""
BAD_TASK_KEYS = [
    (["task=humaneval", "task.limit=0"], "task.limit=0: must be an integer >= 1 or null"),
    (["task=spec_bench", "task.categories=[nope]"],
     "task.categories: unknown nope; allowed: coding, "),
    (["task=tiny", "task.split=calib", "task.calib_fraction=1e-9"],
     "task: categories=null, split=calib keep no prompt of tiny; allowed: "),
]  # fmt: skip


def needs_data(overrides: list[str]) -> None:
    if "task=spec_bench" in overrides:
        from racer_bench.tasks.datafiles import data_file

        try:
            data_file("spec_bench", None)
        except ConfigError:
            pytest.skip("spec_bench data not available")


@pytest.fixture
def no_model(monkeypatch):
    @functools.wraps(loaders.tiny_random)  # the schema check reads the model's keys from it
    def refuse(*args, **kwargs):
        raise AssertionError(LOADED)

    monkeypatch.setattr(loaders, "tiny_random", refuse)


def patched_cli(*args: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", PATCHED_CLI, *TINY, *args, f"hydra.run.dir={tmp_path}"],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize(("overrides", "message"), BAD_TASK_KEYS)
def test_cli_refuses_bad_task_keys_before_the_model_loads(overrides, message, tmp_path):
    needs_data(overrides)
    proc = patched_cli(*overrides, tmp_path=tmp_path)
    assert LOADED not in proc.stderr
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {message}"), proc.stderr
    assert not (tmp_path / "manifest.json").exists()


def test_the_patched_loader_is_the_one_a_good_run_calls(tmp_path):
    """The control: with every task key good, the run reaches the (replaced) loader."""
    proc = patched_cli("task=tiny", "task.limit=1", tmp_path=tmp_path)
    assert proc.returncode == 1 and LOADED in proc.stderr, proc.stderr


@pytest.mark.parametrize(("overrides", "message"), BAD_TASK_KEYS)
def test_run_refuses_bad_task_keys_before_the_model_loads(
    overrides, message, compose_cfg, tmp_path, no_model
):
    needs_data(overrides)
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("[", r"\[")):
        run(compose_cfg(*TINY, *overrides), tmp_path / "run")
    assert not (tmp_path / "run").exists()  # refused before the run folder was made


@pytest.mark.parametrize(("overrides", "message"), BAD_TASK_KEYS)
def test_grid_refuses_a_point_with_bad_task_keys_before_the_model_loads(
    overrides, message, no_model
):
    needs_data(overrides)
    base = [*TINY, "method=pld"]
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("[", r"\[")):
        build_grid(base, [["verifier=greedy"], overrides])


@pytest.fixture
def validations(monkeypatch) -> list[object]:
    """The configs :func:`racer_bench.run.config.validate` checks, one entry per call."""
    import racer_bench.run.config as run_config

    seen: list[object] = []
    check = run_config.check

    def counted(cfg, schema, *args, **kwargs):
        seen.append(cfg)
        return check(cfg, schema, *args, **kwargs)

    monkeypatch.setattr(run_config, "check", counted)
    return seen


def test_a_run_validates_its_config_once(compose_cfg, tmp_path, validations):
    summary = run(compose_cfg(*TINY, "task=tiny", "task.limit=1", "method=pld"), tmp_path)
    assert summary["n_prompts"] == 1 and len(validations) == 1


def test_a_grid_validates_each_point_once(validations):
    base = [*TINY, "task=tiny", "task.limit=1", "method=pld"]
    build_grid(base, [["verifier=greedy"], ["verifier=asd"]])
    assert len(validations) == 2
