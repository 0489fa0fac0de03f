"""Every key of every YAML under ``conf/`` has a declared type and every number a declared range
(:mod:`racer_bench.config.schema`); a number set out of its range, or to a string, is refused before
anything loads with one line naming the key.

The walk runs in-process (the CLI turns the same ConfigError into status 2:
``tests/integration/test_cli.py`` runs it for a handful of keys). A key added to a YAML without
a declaration next to its code fails here, loudly, naming the file and the key.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, is_dataclass
from functools import cache
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
import yaml
from annotated_types import Ge, Gt, Interval, Le, Lt
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf, open_dict

from racer_bench.config.run import RunConfig
from racer_bench.config.schema import (
    RESERVED_KEYS,
    PositiveInt,
    bounds,
    check,
    core_type,
    keys_of,
    target_of,
)
from racer_bench.config.sitting import SittingConfig
from racer_bench.config.train import TrainConfig
from racer_bench.errors import ConfigError
from tests.conftest import CONF_DIR, REPO

HYDRA_OWN = "hydra"  # conf/hydra/: Hydra's and its launchers' settings, checked by Hydra
NOT_KEYS = ("defaults", "hydra")  # a file's defaults list and Hydra settings are not run keys
REQUIRED = {"model/hf.yaml": ["model.path=org/model"]}  # values a file leaves to the user (???)


def train_schema() -> type:
    return TrainConfig


def yaml_files() -> list[Path]:
    return sorted(
        p for p in CONF_DIR.rglob("*.yaml") if p.relative_to(CONF_DIR).parts[0] != HYDRA_OWN
    )


def composition(path: Path) -> tuple[str, list[str], Any, str]:
    """(primary config, overrides selecting this file, its schema, the package of its keys)."""
    rel = path.relative_to(CONF_DIR)
    is_global = "@package _global_" in path.read_text().split("\n", 1)[0]
    if rel.parts[0] == "train":
        return "train/config", [], train_schema(), ""
    if rel == Path("config.yaml"):
        return "config", [], RunConfig, ""
    if rel == Path("sitting.yaml"):
        return "sitting", [], SittingConfig, ""
    group = rel.parent.as_posix()
    overrides = [f"{group}={rel.stem}", *REQUIRED.get(rel.as_posix(), [])]
    return "config", overrides, RunConfig, "" if is_global else f"{group}."


def leaves(tree: Any, prefix: str = "") -> Iterator[str]:
    """Dotted paths of the values a YAML file sets (not its defaults list or Hydra settings)."""
    for key, value in (tree or {}).items():
        if (not prefix and key in NOT_KEYS) or key in RESERVED_KEYS:
            continue
        if isinstance(value, dict) and value:
            yield from leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


@cache
def composed(primary: str, overrides: tuple[str, ...] = ()) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(primary, list(overrides))
    with open_dict(cfg):
        cfg.pop("hydra", None)
    return cfg


def with_option(group: str, path: Path, updates: Sequence[str] = ()) -> DictConfig:
    """The primary config with ``path`` as its ``group`` option, composed as Hydra does for an
    option without a defaults list (its content becomes the group node), without Hydra's cost."""
    cfg = composed("config").copy()
    with open_dict(cfg):
        cfg[group] = OmegaConf.load(path)
        for update in updates:
            key, _, value = update.partition("=")
            OmegaConf.update(cfg, key, yaml.safe_load(value), merge=False)
    return cfg


def compose_file(path: Path) -> tuple[DictConfig, Any, list[str]]:
    """The composed config selecting ``path``, its schema, and the dotted keys it sets."""
    primary, overrides, schema, package = composition(path)
    raw = yaml.safe_load(path.read_text()) or {}
    if package and "defaults" not in raw:
        cfg = with_option(package[:-1], path, overrides[1:])
    else:
        cfg = composed(primary, tuple(overrides)).copy()
    return cfg, schema, [f"{package}{k}" for k in leaves(raw)]


def type_of(cfg: DictConfig, schema: Any, dotted: str) -> Any:
    """The declared annotation of the key ``dotted`` (``method.capacity``) of ``cfg`` under
    ``schema``, found as :func:`check` finds it; KeyError when nothing declares it."""
    node: Any = cfg
    tp = schema
    for part in dotted.split("."):
        target = target_of(node, "") if isinstance(node, DictConfig) else None
        if target is not None or (is_dataclass(tp) and isinstance(tp, type)):
            declared = keys_of(target if target is not None else tp)
        elif get_origin(tp) in (dict, Mapping):
            declared = {part: get_args(tp)[1]}
        else:
            declared = {}
        if part not in declared:
            raise KeyError(dotted)
        tp = declared[part]
        node = node.get(part) if isinstance(node, DictConfig) else None
    return tp


def is_number(value: Any) -> bool:
    if isinstance(value, list):
        return bool(value) and all(is_number(v) for v in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def out_of_range(tp: Any, as_list: bool) -> Any:
    """A number just outside the first declared bound of ``tp`` (in a list if ``as_list``)."""
    bound = bounds(tp)[0]
    if isinstance(bound, Interval):
        ends = (Ge(bound.ge), Gt(bound.gt), Le(bound.le), Lt(bound.lt))
        bound = next(b for b in ends if limit(b) is not None)
    step = {Ge: -1, Gt: 0, Le: 1, Lt: 0}[type(bound)]
    bad = limit(bound) + (step if core_type(tp) is int else 0.5 * step)
    return [bad] if as_list else bad


def limit(bound: Ge | Gt | Le | Lt) -> Any:
    return getattr(bound, type(bound).__name__.lower())


def problems(cfg: DictConfig, schema: Any, keys: list[str]) -> list[str]:
    """Keys without a declared type, and numbers without a declared range."""
    found = []
    for key in keys:
        try:
            tp = type_of(cfg, schema, key)
        except KeyError:
            found.append(f"{key}: no declared type (declare it next to the code that takes it)")
            continue
        if is_number(OmegaConf.select(cfg, key)) and not bounds(tp):
            found.append(f"{key}: a number without a declared range ({tp})")
    return found


def set_key(cfg: DictConfig, key: str, value: Any) -> DictConfig:
    bad = cfg.copy()
    with open_dict(bad):
        OmegaConf.update(bad, key, value, merge=False)
    return bad


def assert_refused(cfg: DictConfig, schema: Any, key: str, value: Any) -> None:
    with pytest.raises(ConfigError) as error:
        check(cfg, schema)
    message = str(error.value)
    assert "\n" not in message, message
    assert message.startswith(f"{key}="), f"{key}={value!r} refused as: {message}"


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: p.relative_to(CONF_DIR).as_posix())
def test_every_key_declared_and_every_number_refused_out_of_range(path):
    cfg, schema, keys = compose_file(path)
    check(cfg, schema)  # the file as shipped is valid
    assert problems(cfg, schema, keys) == [], f"{path.relative_to(REPO)}"
    for key in keys:
        value = OmegaConf.select(cfg, key)
        if not is_number(value):
            continue
        bad = out_of_range(type_of(cfg, schema, key), as_list=isinstance(value, list))
        assert_refused(set_key(cfg, key, bad), schema, key, bad)
        assert_refused(set_key(cfg, key, "abc"), schema, key, "abc")


def test_the_walk_flags_undeclared_keys_and_numbers_without_a_range():
    @dataclass
    class Loose:
        declared: PositiveInt = 1
        unbounded: int = 3

    cfg = OmegaConf.create({"declared": 2, "unbounded": 5, "stray": 7})
    assert problems(cfg, Loose, ["declared", "unbounded", "stray"]) == [
        "unbounded: a number without a declared range (<class 'int'>)",
        "stray: no declared type (declare it next to the code that takes it)",
    ]


def test_messages_say_what_is_allowed():
    cases = [
        ("method", "racer", "method.capacity=-1", "method.capacity=-1: must be an integer >= 1"),
        ("verifier", "asd", "verifier.budget=-3", "verifier.budget=-3: must be a number >= 0"),
        (
            "verifier",
            "sampling",
            "verifier.top_p=0",
            "verifier.top_p=0: must be a number in (0, 1]",
        ),
        ("task", "gsm8k", "task.num_fewshot=9", "task.num_fewshot=9: must be an integer in [0, 8]"),
        ("method", "logitspec", "method.topk=0", "method.topk=0: must be an integer >= 1 or null"),
        ("method", "ar", "baseline=maybe", "baseline=maybe: allowed values are same_run, none"),
        ("method", "racer", "hardware=tpu", "hardware=tpu: allowed values are cpu, gpu"),
        (
            "method",
            "pld",
            "method.match=last",
            "method.match=last: allowed values are earliest, latest",
        ),
        ("method", "ar", "max_new_tokens=0", "max_new_tokens=0: must be an integer >= 1"),
        ("model", "hf", "seed=0", "model.path: required, set model.path=<value>"),
        (
            "method",
            "ar",
            "method.typo=1",
            "method.typo: unknown key (keys of NullDrafter: vocab_size)",
        ),
    ]
    for group, name, update, message in cases:
        with pytest.raises(ConfigError) as error:
            check(with_option(group, CONF_DIR / group / f"{name}.yaml", [update]), RunConfig)
        assert str(error.value) == message
