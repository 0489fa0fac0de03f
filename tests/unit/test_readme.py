"""The README's main command is the design's main job, and it composes."""

from __future__ import annotations

import re

from racer_bench.run.config import validate
from tests.conftest import REPO

MAIN = re.compile(r"python -m racer_bench (?P<overrides>[^\n`]+)")


def test_the_main_command_runs_racer_on_humaneval_with_a_limit(compose_cfg) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    setup = readme.split("## Set up", 1)[1].split("## ", 1)[0]
    overrides = MAIN.search(setup).group("overrides").split()
    assert overrides[:2] == ["method=racer", "task=humaneval"]
    limit = [o for o in overrides if o.startswith("task.limit=")]
    assert limit and 1 <= int(limit[0].split("=")[1]) <= 20  # about 3 minutes on 2 cores
    assert "reference=generate" in overrides  # the table shows generate()'s tok/s beside ours
    cfg = compose_cfg(*overrides)
    validate(cfg)
    assert cfg.method._target_.endswith("RacerDrafter")
