"""Old run folders still resume after code moves: every ``_target_`` that a committed record's
configuration names (curated and archived manifests and ``.hydra/config.yaml``) still resolves
to an object, as ``resume=`` re-instantiates them: directly, through a package that re-exports
a moved class, or through resume's table of moved targets (:data:`MOVED_TARGETS`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from hydra.utils import get_object

from racer_bench.run.resume import MOVED_TARGETS, retarget
from tests.conftest import REPO

RECORDS = REPO / "results"


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
    found: set[str] = set()
    for path in sorted(RECORDS.rglob("manifest.json")):
        found |= set(targets(json.loads(path.read_text(encoding="utf-8")).get("config")))
    for path in sorted(RECORDS.rglob(".hydra/config.yaml")):
        found |= set(targets(yaml.safe_load(path.read_text(encoding="utf-8"))))
    return found


TARGETS = sorted(recorded_targets())


def test_records_name_targets() -> None:
    assert "racer_bench.models.load_smollm2" in TARGETS


@pytest.mark.parametrize("target", TARGETS)
def test_a_recorded_target_still_resolves(target: str) -> None:
    assert callable(get_object(MOVED_TARGETS.get(target, target)))


def test_resume_points_moved_targets_at_their_new_place() -> None:
    saved = {"verifier": {"_target_": "racer_bench.asd.ASDVerifier", "budget": 8},
             "grid": [{"_target_": "racer_bench.verify.GreedyVerifier"}], "seed": 0}  # fmt: skip
    assert retarget(saved) == {
        "verifier": {"_target_": "racer_bench.engine.asd.ASDVerifier", "budget": 8},
        "grid": [{"_target_": "racer_bench.engine.verify.GreedyVerifier"}],
        "seed": 0,
    }
