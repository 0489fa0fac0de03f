"""Hardware-dependent config defaults."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate

from racer_bench.config.construct import constructor_node
from racer_bench.errors import ConfigError
from racer_bench.run.resolvers import by_hardware, device_kind


def test_device_kind_names():
    assert device_kind("cpu") == "cpu"
    assert device_kind("cuda") == device_kind("cuda:1") == "gpu"
    assert device_kind("auto") in ("cpu", "gpu")


def test_by_hardware_picks_and_rejects():
    assert by_hardware("cpu", 15, 63) == 15
    assert by_hardware("gpu", 15, 63) == 63
    with pytest.raises(ConfigError, match="hardware=tpu"):
        by_hardware("tpu", 15, 63)


@pytest.mark.parametrize(("hardware", "capacity"), [("cpu", 15), ("gpu", 63)])
def test_racer_capacity_follows_hardware(compose_cfg, hardware, capacity):
    cfg = compose_cfg("method=racer", "model=tiny_random", f"hardware={hardware}",
                      "scheduler=fixed")  # fmt: skip
    assert cfg.method.capacity == capacity
    assert instantiate(constructor_node(cfg.method))(vocab_size=260).capacity == capacity


def test_hardware_follows_model_device(compose_cfg):
    assert compose_cfg("model=tiny_random").hardware == "cpu"


@pytest.mark.parametrize(
    ("overrides", "racer", "logitspec"),
    [
        ((), 63, 64),  # auto on a CPU: the confidence scheduler's candidates
        (("scheduler=fixed",), 15, 8),
        (("backend=vllm",), 15, 8),  # auto inside vLLM: fixed at the hardware's sizes
        (("hardware=gpu",), 63, 64),  # auto on an accelerator: fixed at the papers' sizes
        (("scheduler=confidence",), 63, 64),  # generous candidates, cut per step
        (("scheduler=confidence", "scheduler.draft_sizing=cpu"), 15, 8),
        (("hardware=gpu", "scheduler=fixed"), 63, 64),
    ],
)
def test_draft_sizes_follow_the_scheduler(compose_cfg, overrides, racer, logitspec):
    cfg = compose_cfg("method=racer", "model=tiny_random", *overrides)
    assert cfg.method.capacity == racer
    cfg = compose_cfg("method=logitspec", "model=tiny_random", *overrides)
    assert cfg.method.draft_tree_capacity == logitspec


def test_bad_draft_sizing_is_a_config_error(compose_cfg):
    from racer_bench.cli import find_config_error

    cfg = compose_cfg("method=racer", "model=tiny_random", "scheduler.draft_sizing=tpu")
    with pytest.raises(Exception) as info:  # OmegaConf wraps the ConfigError
        _ = cfg.method.capacity
    error = find_config_error(info.value)
    assert error is not None and "scheduler.draft_sizing=tpu: allowed" in str(error)


def test_old_run_configs_without_a_scheduler_follow_hardware():
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"hardware": "gpu", "size": "${draft_size:15,63}"})
    assert cfg.size == 63
