"""The per-prompt comparison with strict greedy, on the tiny model."""

from __future__ import annotations

from racer_bench.run.paired import compare_with_strict
from racer_bench.tasks.tiny import TinyTask


class BrokenAgreement(TinyTask):
    def agreement(self, prompt, outputs, reference):
        raise RuntimeError("no answer")


def turn(text: str) -> dict:
    return {"text": text, "tokens": list(text.encode())}


def make_record(method: str, strict: str) -> dict:
    return {"id": "tiny/0", "method": {"turns": [turn(method)]},
            "strict": {"turns": [turn(strict)]}, "baseline": {"turns": [turn(strict)]},
            "score": {"nonempty": 1.0}}  # fmt: skip


def test_measures_every_paired_mode(tiny_target):
    task = TinyTask()
    prompt = task.load()[0]
    record = make_record("a b\nsame", "a c\nsame")
    compare_with_strict(tiny_target, task, prompt, record)
    assert record["agreement"] == 1.0  # the tiny task's answer: the last line
    assert record["method"]["turns"][0]["target_logprob"] < 0
    assert "target_logprob" not in record["baseline"]["turns"][0]
    assert "quality_error" not in record


def test_a_failing_measure_keeps_the_record_and_says_why(tiny_target):
    task = BrokenAgreement()
    record = make_record("x", "y")
    compare_with_strict(tiny_target, task, task.load()[0], record)
    assert "agreement" not in record and "no answer" in record["quality_error"]
    assert "target_logprob" in record["strict"]["turns"][0]  # the other measure still ran


def test_nothing_without_strict(tiny_target):
    record = {"method": {"turns": [turn("x")]}}
    compare_with_strict(tiny_target, TinyTask(), TinyTask().load()[0], record)
    assert record == {"method": {"turns": [turn("x")]}}
