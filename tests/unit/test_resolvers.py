"""Hardware-dependent config defaults."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate

from racer_bench.errors import ConfigError
from racer_bench.resolvers import by_hardware, device_kind


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
    cfg = compose_cfg("method=racer", "model=tiny_random", f"hardware={hardware}")
    assert cfg.method.capacity == capacity
    assert instantiate(cfg.method)(vocab_size=260).capacity == capacity


def test_hardware_follows_model_device(compose_cfg):
    assert compose_cfg("model=tiny_random").hardware == "cpu"
