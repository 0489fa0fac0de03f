"""Old run folders still resume after code moves: every ``_target_`` that a committed record's
configuration names (curated manifests, bench records and ``.hydra/config.yaml``, plus those
the archived records named before they left the tree, frozen in :data:`ARCHIVED`) resolves to
an object once mapped through :func:`racer_bench.config.legacy.today`, as ``resume=``, the
verifier grid and replay read them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from hydra.utils import get_object

from racer_bench.config import legacy
from tests.conftest import REPO

RECORDS = (REPO / "results", REPO / "docs" / "bench")
# targets the records of results/archive/ named (that folder left the tree; docs/archive.md)
ARCHIVED = [
    "methods.dspark.DSparkDrafter",
    "methods.eagle3.Eagle3Drafter",
    "racer_bench.asd.ASDVerifier",
    "racer_bench.engine.scheduler.ConfidenceScheduler",
    "racer_bench.engine.scheduler.FixedScheduler",
    "racer_bench.engine.scheduler_settings.FixedSettings",
    "racer_bench.verify.GreedyVerifier",
]


def targets(node: Any) -> Iterator[str]:
    """Every ``_target_`` string anywhere in a JSON/YAML tree."""
    if isinstance(node, dict):
        if isinstance(node.get("_target_"), str):
            yield node["_target_"]
        for value in node.values():
            yield from targets(value)
    elif isinstance(node, list):
        for value in node:
            yield from targets(value)


def recorded_targets() -> set[str]:
    found: set[str] = set(ARCHIVED)
    for root in RECORDS:
        for path in sorted(root.rglob("manifest.json")):
            found |= set(targets(json.loads(path.read_text(encoding="utf-8")).get("config")))
        for path in sorted(root.rglob(".hydra/config.yaml")):
            found |= set(targets(yaml.safe_load(path.read_text(encoding="utf-8"))))
    return found


TARGETS = sorted(recorded_targets())


def test_records_name_targets_of_before_the_moves() -> None:
    assert "racer_bench.models.load_smollm2" in TARGETS  # a re-export that is gone
    assert "racer_bench.engine.asd.ASDVerifier" in TARGETS  # a module that moved


@pytest.mark.parametrize("target", TARGETS)
def test_a_recorded_target_still_resolves(target: str) -> None:
    assert callable(get_object(legacy.today(target)))


def test_todays_names_are_fixed_points() -> None:
    for target in TARGETS:
        assert legacy.today(legacy.today(target)) == legacy.today(target)
    assert legacy.today("racer_bench.engine.verify.asd.ASDVerifier") == (
        "racer_bench.engine.verify.asd.ASDVerifier"
    )


def test_a_package_that_moved_keeps_its_inner_path() -> None:
    assert legacy.today("methods.heads.kind.HeadKind") == "methods.common.heads.kind.HeadKind"


def test_retarget_points_moved_targets_at_their_new_place() -> None:
    saved = {"verifier": {"_target_": "racer_bench.asd.ASDVerifier", "budget": 8},
             "grid": [{"_target_": "racer_bench.verify.GreedyVerifier"}], "seed": 0}  # fmt: skip
    assert legacy.retarget(saved) == {
        "verifier": {"_target_": "racer_bench.engine.verify.asd.ASDVerifier", "budget": 8},
        "grid": [{"_target_": "racer_bench.engine.verify.greedy.GreedyVerifier"}],
        "seed": 0,
    }
