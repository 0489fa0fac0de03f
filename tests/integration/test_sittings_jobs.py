"""A table's sittings as Hydra jobs: the basic launcher and submitit_local make the same table
(same cells, same outputs and MAT in every sitting), and the rankings pool them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from racer_bench.analysis import rankings
from racer_bench.record import folder as records
from tests.conftest import REPO

# the tables must match exactly: following the machine makes tree sizes depend on timings
TINY = (
    '["debug=cpu_tiny","task=tiny","task.limit=2","max_new_tokens=8","scheduler.follow_cost=false"]'
)


def sittings(out, cache, *extra: str) -> None:
    argv = [sys.executable, "-m", "racer_bench.sittings", "-m", "table=racer_ablation",
            "sitting=0,1", f"out={out}", "cells=[full,last_logit]", f"cell_overrides={TINY}",
            f"paths.cache_dir={cache}", *extra]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]


def outputs(folder) -> dict[tuple[str, str], tuple]:
    """(sitting, cell) -> (every method output's tokens, MAT)."""
    out = {}
    for sitting in rankings.sitting_dirs(folder):
        for cell in sorted(p for p in sitting.iterdir() if p.is_dir()):
            tokens = [t["tokens"] for r in records.load_prompts(cell)
                      for t in r["method"]["turns"]]  # fmt: skip
            mat = records.read_json(cell / records.SUMMARY_FILE)["mat"]
            out[sitting.name, cell.name] = (json.dumps(tokens), mat)
    return out


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    root = tmp_path_factory.mktemp("sittings")
    sittings(root / "basic", root / "cache")
    sittings(root / "local", root / "cache", "hydra/launcher=submitit_local")
    return root


def test_the_launchers_make_the_same_table(both) -> None:
    basic, local = outputs(both / "basic"), outputs(both / "local")
    assert set(basic) == {(s, c) for s in ("s0", "s1") for c in ("ar", "full", "last_logit")}
    assert basic == local


def test_the_rankings_pool_the_sittings_with_the_aa_floor(both) -> None:
    ranked = rankings.rankings(both / "local")
    overall = ranked["overall"]
    assert ranked["sittings"] == 2 and overall["aa"] == ["ar"]
    assert overall["floor"] is not None and overall["floor"] > 0
    assert {n for group in overall["ordering"] for n in group} == {"full", "last_logit"}
    assert len(overall["cells"]["full"]["sittings"]) == 2
