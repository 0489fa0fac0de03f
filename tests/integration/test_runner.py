"""The runner on the tiny model: output contract, resume, failures, interrupts."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest

from racer_bench.analysis.records import load_prompts
from racer_bench.runner import run
from racer_bench.tasks.tiny import TinyTask

CONTRACT = ("n_prompts", "new_tokens", "tokens_per_s", "baseline_tokens_per_s", "speedup", "mat",
            "identical", "draft_time_share", "retrieval_hit_rate", "nonempty")  # fmt: skip
SMOKE = ("model=tiny_random", "task=tiny", "max_new_tokens=16", "warmup_prompts=0")


class FlakyTask(TinyTask):
    """Raises on chosen prompts: ``fail_on`` with a RuntimeError, ``interrupt_on`` with Ctrl-C."""

    name: ClassVar[str] = "flaky"

    def __init__(self, fail_on: int = -1, interrupt_on: int = -1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fail_on, self.interrupt_on = fail_on, interrupt_on

    def render(self, prompt, turn, history, tokenizer):
        index = int(prompt.id.split("/")[1])
        if index == self.fail_on:
            raise RuntimeError("boom")
        if index == self.interrupt_on:
            raise KeyboardInterrupt
        return super().render(prompt, turn, history, tokenizer)


def test_run_writes_the_output_contract(compose_cfg, tmp_path):
    cfg = compose_cfg(*SMOKE, "method=pld", "task.limit=3")
    summary = run(cfg, tmp_path, {"method": "pld"})
    for key in CONTRACT:
        assert key in summary, key
    assert summary["n_prompts"] == 3 and summary["identical"] == 1.0
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["speedup"] == pytest.approx(summary["speedup"])
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["lossless"] is True and manifest["method"] == "pld"
    lines = load_prompts(tmp_path)
    assert [r["id"] for r in lines] == ["tiny/0", "tiny/1", "tiny/2"]
    turn = lines[0]["method"]["turns"][0]
    assert len(turn["tokens"]) == 16 and len(turn["steps"]["n_committed"]) >= 1
    assert summary["mat"] >= 1.0


def test_failed_prompt_is_recorded_and_run_goes_on(compose_cfg, tmp_path):
    cfg = compose_cfg(*SMOKE, "task.limit=3", f"task._target_={__name__}.FlakyTask",
                      "+task.fail_on=1")  # fmt: skip
    summary = run(cfg, tmp_path)
    statuses = [(r["id"], r["status"]) for r in load_prompts(tmp_path)]
    assert statuses == [("tiny/0", "ok"), ("tiny/1", "failed"), ("tiny/2", "ok")]
    assert "boom" in load_prompts(tmp_path)[1]["error"]
    assert summary["n_failed"] == 1 and summary["n_prompts"] == 2


def test_interrupt_keeps_finished_prompts_and_resume_continues(compose_cfg, tmp_path):
    cfg = compose_cfg(*SMOKE, "task.limit=4", f"task._target_={__name__}.FlakyTask",
                      "+task.interrupt_on=2")  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        run(cfg, tmp_path)
    assert [r["id"] for r in load_prompts(tmp_path)] == ["tiny/0", "tiny/1"]
    assert (tmp_path / "INCOMPLETE").exists()
    first = load_prompts(tmp_path)[0]
    resumed = compose_cfg(*SMOKE, "task.limit=4", f"resume={tmp_path}")
    summary = run(resumed, tmp_path / "ignored")
    ids = [r["id"] for r in load_prompts(tmp_path)]
    assert ids == ["tiny/0", "tiny/1", "tiny/2", "tiny/3"]  # nothing redone
    assert load_prompts(tmp_path)[0] == first
    assert summary["n_prompts"] == 4 and not (tmp_path / "INCOMPLETE").exists()
