"""Where things live, written once in ``racer_bench.config.paths``: the cache default and its
environment variable, and the run's per-turn token limit."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from racer_bench.config import construct
from racer_bench.config import paths as configs
from racer_bench.engine.fast.kernel_library import kernel_dir
from racer_bench.tasks.tiny import TinyTask


def test_the_cache_is_the_environment_variable_else_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(configs.CACHE_ENV, raising=False)
    assert configs.cache_dir() == configs.DEFAULT_CACHE_DIR == "~/.cache/racer_bench"
    assert kernel_dir() == Path("~/.cache/racer_bench/kernels").expanduser()
    monkeypatch.setenv(configs.CACHE_ENV, str(tmp_path))
    assert configs.cache_dir() == str(tmp_path)
    assert kernel_dir() == tmp_path / "kernels"


def test_the_paths_config_has_the_same_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(configs.CACHE_ENV, raising=False)
    paths = OmegaConf.load(configs.CONF_DIR / "paths" / "default.yaml")
    assert paths.cache_dir == configs.DEFAULT_CACHE_DIR
    assert f"{paths.cache_dir}/models" == configs.DEFAULT_MODELS_DIR


def test_a_task_limit_overrides_the_run_limit() -> None:
    assert construct.task_max_new_tokens(TinyTask(max_new_tokens=7), 256) == 7
    assert construct.task_max_new_tokens(TinyTask(), 256) == 256
