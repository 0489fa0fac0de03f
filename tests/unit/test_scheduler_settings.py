"""The scheduler group is read in one place: each key of each ``conf/scheduler`` YAML has
exactly one reader among the draft sizing, the cost-profile settings and the scheduler."""

from __future__ import annotations

from typing import Any

import pytest
from omegaconf import OmegaConf

from racer_bench.config.schema import RESERVED_KEYS
from racer_bench.engine.schedule.cost import synthetic
from racer_bench.engine.schedule.scheduler import ConfidenceOptions, ConfidenceScheduler
from racer_bench.engine.schedule.settings import (
    ROUTING_KEYS,
    AutoSettings,
    ConfidenceSettings,
    FixedSettings,
    SchedulerSettings,
    settings_of,
    upgrade,
)
from racer_bench.errors import ConfigError
from tests.conftest import CONF_DIR

SCHEDULERS = sorted(p.stem for p in (CONF_DIR / "scheduler").glob("*.yaml"))
OTHER_STRING = {"cpu": "gpu", "gpu": "cpu", "auto": "flat", "flat": "steep"}


def answers(settings: SchedulerSettings) -> dict[str, Any]:
    """What each reader gets from the settings."""
    scheduler = settings.make(synthetic("flat"))
    return {"draft sizing": settings.draft_sizing, "cost profile": settings.profile_settings(),
            "scheduler": getattr(scheduler, "options", None)}  # fmt: skip


def changed(value: Any) -> Any:
    """Another allowed value of a key's type."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value / 2 if value > 0 else 0.5
    assert value in OTHER_STRING, f"add another value for {value!r} to OTHER_STRING"
    return OTHER_STRING[value]


@pytest.mark.parametrize("name", SCHEDULERS)
def test_every_key_has_exactly_one_reader(compose_cfg, name):
    cfg = compose_cfg("model=tiny_random", f"scheduler={name}")
    node = OmegaConf.to_container(cfg.scheduler, resolve=True)
    before = answers(settings_of(node))
    keys = [k for k in node if k not in RESERVED_KEYS and k not in ROUTING_KEYS]
    assert keys, f"conf/scheduler/{name}.yaml sets no key"
    for key in keys:
        after = answers(settings_of({**node, key: changed(node[key])}))
        readers = [reader for reader in before if before[reader] != after[reader]]
        assert len(readers) == 1, f"scheduler.{key} ({name}) is read by {readers or 'nobody'}"


@pytest.mark.parametrize(
    ("overrides", "kind", "sizing"),
    [((), ConfidenceSettings, "gpu"), (("hardware=gpu",), FixedSettings, "gpu"),
     (("backend=vllm",), FixedSettings, "cpu"), (("scheduler=fixed",), FixedSettings, "cpu")],
)  # fmt: skip
def test_auto_is_confidence_only_on_a_cpu_with_our_loop(compose_cfg, overrides, kind, sizing):
    cfg = compose_cfg("model=tiny_random", *overrides)
    settings = settings_of(OmegaConf.to_container(cfg.scheduler, resolve=True))
    assert type(settings) is kind and settings.draft_sizing == sizing


def test_auto_refuses_a_confidence_key_it_would_ignore():
    assert AutoSettings(hardware="gpu", prior_mean=0.5).pick() == FixedSettings("gpu")
    with pytest.raises(ConfigError, match=r"scheduler\.prior_mean.*scheduler=confidence"):
        AutoSettings(hardware="gpu", prior_mean=0.3).pick()


def test_a_key_nobody_reads_is_refused():
    node = {"_target_": "racer_bench.engine.schedule.settings.FixedSettings", "explore": 0.1}
    with pytest.raises(ConfigError, match="explore"):
        settings_of(node)


def test_profile_is_a_spec_in_the_settings_and_a_curve_in_the_scheduler():
    settings = ConfidenceSettings(profile="linear:0.1", prior_mean=0.3)
    scheduler = settings.make(settings.profile_settings().resolve(None, ".", 11))
    assert isinstance(scheduler, ConfidenceScheduler) and scheduler.profile(11) == 2.0
    assert scheduler.options == ConfidenceOptions(prior_mean=0.3)
    with pytest.raises(ConfigError, match=r"scheduler\.profile=sharp"):
        ConfidenceSettings(profile="sharp")


def test_configs_without_a_scheduler_get_the_fixed_one_sized_by_hardware():
    assert settings_of(None, "gpu") == FixedSettings("gpu")
    assert settings_of({}, "cpu").draft_sizing == "cpu"


def test_saved_configs_naming_the_scheduler_classes_still_load():
    old = {"_target_": "racer_bench.engine.scheduler.ConfidenceScheduler", "_partial_":
    True,
           "draft_sizing": "gpu", "profile": "auto", "prior_mean": 0.5}  # fmt: skip
    assert settings_of(old) == ConfidenceSettings()
    cfg = OmegaConf.create({"scheduler": old})
    upgrade(cfg)
    assert "_partial_" not in cfg.scheduler
    assert cfg.scheduler._target_ == "racer_bench.engine.schedule.settings.ConfidenceSettings"
    fixed = {
        "_target_": "racer_bench.engine.scheduler.FixedScheduler",
        "draft_sizing": "cpu",
    }
    assert settings_of(fixed) == FixedSettings("cpu")


def test_a_run_saved_with_the_scheduler_class_resumes(compose_cfg, tmp_path):
    import json

    from racer_bench.run.config import scheduler_settings, validate
    from racer_bench.run.resume import restore

    cfg = compose_cfg("model=tiny_random", "task=tiny", "method=racer", "scheduler=confidence")
    saved = OmegaConf.to_container(cfg, resolve=True)
    saved["scheduler"] |= {"_target_": "racer_bench.engine.scheduler.ConfidenceScheduler",
                           "_partial_": True}  # fmt: skip
    manifest = {"config": saved, "choices": {"method": "racer", "scheduler": "confidence"}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    resumed = restore(compose_cfg(f"resume={tmp_path}"))
    validate(resumed.cfg)
    assert scheduler_settings(resumed.cfg) == ConfidenceSettings()
    assert resumed.cfg.method.capacity == 63
