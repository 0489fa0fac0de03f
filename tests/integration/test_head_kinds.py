"""A new head kind is one module: registered at test time, it trains through the script's loop."""

from __future__ import annotations

import pytest
import torch
from hydra import compose, initialize_config_dir

from methods.common.heads import kind as head_kind
from racer_bench.errors import ConfigError
from tests.conftest import CONF_DIR, REPO
from tests.integration.test_train_drafter import SOURCES

OVERRIDES = [*SOURCES, "model=tiny_random", "model_name=tiny", "data.max_new_tokens=16",
             "data.batch_size=3", "data.holdout=0.3", "train.eval_every=3",
             "train.save_every=3", "train.max_steps=6", "kind=toy"]  # fmt: skip


def test_a_registered_toy_kind_trains_through_the_script(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(head_kind.HEAD_KINDS, "toy", "tests.integration.toy_head:ToyKind")
    monkeypatch.setenv("RACER_BENCH_CACHE", str(tmp_path))
    monkeypatch.syspath_prepend(str(REPO / "scripts"))
    import train_drafter

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("train/config", OVERRIDES)
    train_drafter.check(cfg, train_drafter.TrainConfig)
    summary = train_drafter.train(cfg)
    assert summary["method"] == "toy" and summary["steps"] == 6
    assert [e["step"] for e in summary["eval_curve"]] == [3, 6]
    assert 0.0 <= summary["depth1_accuracy"]["acc1"] <= 1.0
    folder = tmp_path / "drafters" / "tiny"
    saved = torch.load(folder / "toy.pt", weights_only=False)
    assert saved["kind"] == "toy" and "proj.weight" in saved["state"]
    assert "answer_tokens" in (folder / "toy.losses.csv").read_text().splitlines()[0]


def test_an_unknown_kind_names_the_registered_ones() -> None:
    with pytest.raises(ConfigError, match="kind=lstm: allowed values are medusa, eagle3, dspark"):
        head_kind.head_kind("lstm")
