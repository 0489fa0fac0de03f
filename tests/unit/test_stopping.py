from __future__ import annotations

from racer_bench.engine.stopping import StopRule


def decode(ids: list[int]) -> str:
    return "".join(chr(i) for i in ids)


def test_eos_cuts_after_first_eos():
    rule = StopRule({0}, 100)
    assert rule.cut([5], [1, 0, 2, 0]) == (2, "eos")


def test_length_cut_mid_step():
    rule = StopRule(set(), 5)
    assert rule.cut([1, 2, 3], [4, 5, 6, 7]) == (2, "length")
    assert rule.cut([1], [2]) == (1, None)


def test_eos_exactly_at_length_limit_reports_eos():
    assert StopRule({9}, 3).cut([1, 2], [9, 4]) == (1, "eos")


def test_stop_string_spanning_tokens_cuts_at_completing_token():
    rule = StopRule(set(), 100, ["\ndef "], decode=decode)
    generated = [ord(c) for c in "x = 1"]
    new = [ord(c) for c in "\nde"] + [ord(c) for c in "f f"]
    keep, reason = rule.cut(generated, new)
    assert reason == "stop" and keep == 5  # "\ndef " completes at the 5th new token
    assert rule.clean_text("x = 1\ndef f") == "x = 1"


def test_no_stop_without_match():
    rule = StopRule(set(), 100, ["###"], decode=decode)
    assert rule.cut([65], [66, 67]) == (2, None)
