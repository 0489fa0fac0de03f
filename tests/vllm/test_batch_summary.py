"""vLLM prompt lines with repeated passes, and their per-batch-size summary (synthetic records,
no vLLM): ids, per-request acceptance histograms, the interval over timed batches, per-request
MAT beside the pooled one."""

from __future__ import annotations

import json
import math

from racer_bench.analysis import metrics
from racer_bench.analysis.batches import ar_agreement, batch_block, request_mats, timed_batches
from racer_bench.analysis.summary import summarize_batches
from racer_bench.tasks.base import Prompt
from racer_bench.vllm_backend.batching import PlannedBatch
from racer_bench.vllm_backend.offline import prompt_record
from racer_bench.vllm_backend.step_records import turn_record


class NoScore:
    def score(self, prompt, texts):
        return {}


def new_tokens(accepted: tuple[int, ...]) -> int:
    """The prefill's token, then every step's accepted tokens and bonus (-1: an AR step)."""
    return 1 + sum(max(a, 0) + 1 for a in accepted)


def turn(accepted: tuple[int, ...], seconds: float) -> dict:
    steps = [{"n_draft": 3 if a >= 0 else 0, "n_accepted": max(a, 0)} for a in accepted]
    return turn_record(list(range(new_tokens(accepted))), "", seconds, "length", steps)


def line(pid: str, size: int, repeat: int, batch: int, accepted, t_method: float,
         t_base: float) -> dict:  # fmt: skip
    """A prompt line as run.prompt_record writes it (method and AR make the same tokens)."""
    ar = (-1,) * (new_tokens(accepted) - 1)
    turns = {"baseline": [turn(ar, t_base)], "method": [turn(accepted, t_method)]}
    planned = PlannedBatch(repeat, batch, 0, 1)
    index = ord(pid[0]) - ord("a")
    return prompt_record(Prompt(pid, "code", ["hi"]), index, size, planned, NoScore(), turns)


def test_prompt_lines_name_their_pass_and_carry_an_acceptance_histogram():
    first = line("HumanEval/0", 16, 0, 1, (2, 0, 0, 3), 1.0, 2.0)
    again = line("HumanEval/0", 16, 2, 0, (2, 0, 0, 3), 1.0, 2.0)
    assert first["id"] == "HumanEval/0@b16" and first["repeat"] == 0 and first["batch"] == 1
    assert again["id"] == "HumanEval/0@b16#r2" and again["repeat"] == 2
    assert first["acceptance_hist"] == {0: 2, 2: 1, 3: 1}
    assert json.loads(json.dumps(first))["acceptance_hist"] == {"0": 2, "2": 1, "3": 1}
    assert first["identical"] and first["status"] == "ok"


def batch_size_records() -> list[dict]:
    """Batch 2, two passes of 3 prompts: batches (0,0), (0,1), (1,0), (1,1); the first pass's
    method is twice as fast as AR, the second as fast."""
    records = []
    for repeat, ratio in ((0, 2.0), (1, 1.0)):
        for batch, pids in ((0, ["a", "b"]), (1, ["c"])):
            for pid in pids:
                accepted = (4, 4) if pid == "a" else (0, 0, 0)
                records.append(line(pid, 2, repeat, batch, accepted, 1.0, ratio))
    return records


def test_repeated_passes_time_batches_of_their_own():
    records = batch_size_records()
    batches = timed_batches(records)
    assert [b["batch"] for b in batches] == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert [b["n_prompts"] for b in batches] == [2, 1, 2, 1]
    block = batch_block(records)
    assert block["n_batches"] == 4 and block["n_full_batches"] == 2 and block["n_passes"] == 2
    assert block["speedup_ci95_unit"] == "batch"
    assert block["speedup_per_batch"] == [2.0, 2.0, 1.0, 1.0]
    low, high = block["speedup_ci95"]
    assert 1.0 <= low <= high <= 2.0
    assert batch_block([]) == {}


def test_older_lines_without_a_pass_are_the_first_pass():
    records = batch_size_records()[:3]
    for r in records:
        r.pop("repeat")
    assert [b["batch"] for b in timed_batches(records)] == [[0, 0], [0, 1]]


def test_the_summary_gives_batches_and_per_request_acceptance():
    summary = summarize_batches(batch_size_records(), None, depth=3)
    block = summary["by_batch"]["2"]
    assert block["n_batches"] == 4 and block["speedup_ci95_unit"] == "batch"
    assert block["n_prompts"] == 6
    # one request in three accepts 4 per step (MAT 5 over 2 steps), the others none (MAT 1)
    assert block["mat"] == (2 * 2 * 5 + 4 * 3 * 1) / (2 * 2 + 4 * 3)  # pooled over steps
    assert math.isclose(block["mat_per_request"], (2 * 5 + 4 * 1) / 6)
    assert block["mat_per_request_n"] == 6
    assert block["mat_per_request_quantiles"]["p100"] == 5.0
    assert block["mat_per_request_quantiles"]["p50"] == 1.0
    assert summary["n_batches"] == 4  # the smallest batch size's block at the top


def test_request_mats_skip_lines_without_a_step():
    empty = {"method": {"turns": [turn_record([1], "", 1.0, "length", [])]}}
    assert request_mats([empty, line("a", 1, 0, 0, (1,), 1.0, 1.0)]) == [2.0]
    assert math.isnan(metrics.mat([empty]))


def test_ar_agreement_counts_each_prompt_once(tmp_path):
    def rec(tokens, **extra):
        return {"status": "ok", "baseline": {"turns": [{"tokens": tokens}]}, **extra}

    vllm = [rec([1, 2], id="a@b1", prompt_id="a", batch_size=1, repeat=0),
            rec([1, 2], id="a@b1#r1", prompt_id="a", batch_size=1, repeat=1)]  # fmt: skip
    for name, records in (("v", vllm), ("n", [rec([1, 2], id="a")])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "prompts.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in records)
        )
    assert ar_agreement(tmp_path / "v", tmp_path / "n") == (1, 1)
