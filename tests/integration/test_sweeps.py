"""Sweep and launcher configs compose (nothing is launched)."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from tests.conftest import CONF_DIR

SWEEPS = sorted(p.stem for p in (CONF_DIR / "sweep").glob("*.yaml"))


@pytest.mark.parametrize("sweep", SWEEPS)
def test_sweep_composes_as_multirun(sweep):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", [f"sweep={sweep}"], return_hydra_config=True)
    assert str(cfg.hydra.mode) == "RunMode.MULTIRUN"
    assert cfg.hydra.sweeper.params


def test_slurm_launcher_composes():
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", ["hydra/launcher=slurm"], return_hydra_config=True)
    assert "submitit" in cfg.hydra.launcher._target_.lower()
    assert cfg.hydra.launcher.gpus_per_node == 1
