"""``methods/`` at its top level is one module or package per ``conf/method/*.yaml`` (named like
it) plus ``common/``, the parts drafters share. A method YAML whose drafter is not in
``methods/`` names it outside: the AR baseline's null drafter (the loop's own) and vLLM's
built-in proposers."""

from __future__ import annotations

import yaml

from tests.conftest import REPO

METHODS = REPO / "methods"
CONF = REPO / "conf" / "method"
SHARED = "common"


def method_entries() -> set[str]:
    """Top-level modules and packages of ``methods/`` except ``common``."""
    modules = {p.stem for p in METHODS.glob("*.py") if p.stem != "__init__"}
    packages = {p.name for p in METHODS.iterdir() if (p / "__init__.py").exists()}
    return (modules | packages) - {SHARED}


def target_of(name: str) -> str:
    return str(yaml.safe_load((CONF / f"{name}.yaml").read_text(encoding="utf-8"))["_target_"])


def test_every_method_module_has_its_yaml() -> None:
    yamls = {p.stem for p in CONF.glob("*.yaml")}
    assert method_entries() <= yamls, sorted(method_entries() - yamls)


def test_every_method_yaml_targets_its_own_module_or_names_one_outside() -> None:
    for path in sorted(CONF.glob("*.yaml")):
        target = target_of(path.stem)
        if path.stem in method_entries():
            assert target.startswith(f"methods.{path.stem}."), (path.name, target)
        else:  # the loop's null drafter (ar) or vLLM's own proposers (vllm_*)
            assert target.startswith("racer_bench."), (path.name, target)


def test_the_helpers_live_in_common() -> None:
    helpers = {p.stem for p in (METHODS / SHARED).glob("*.py")} - {"__init__"}
    assert {"draft_tree", "datastore", "suffix_tree"} <= helpers
    assert not helpers & method_entries()
