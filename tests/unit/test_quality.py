"""Quality measures of a lossy verifier against strict greedy, without a model."""

from __future__ import annotations

import math

import pytest

from racer_bench.analysis import quality
from racer_bench.tasks.scoring import boxed_answers_agree, numeric_answers_agree


def record(method: list[list[int]], strict: list[list[int]], lp=None, slp=None, **extra):
    def mode(turns, logprobs):
        out = [{"tokens": t} for t in turns]
        for turn, value in zip(out, logprobs or [], strict=False):
            turn[quality.LOGPROB_KEY] = value
        return {"turns": out}

    return {"method": mode(method, lp), "strict": mode(strict, slp), **extra}


def test_first_divergence_is_a_share_of_the_output():
    assert quality.first_divergence([1, 2, 3, 4], [1, 2, 3, 4]) == 1.0
    assert quality.first_divergence([1, 2, 9, 4], [1, 2, 3, 4]) == 0.5
    assert quality.first_divergence([9, 2], [1, 2]) == 0.0
    assert (
        quality.first_divergence([1, 2], [1, 2, 3, 4]) == 1.0
    )  # stopped first: all it wrote agrees
    assert quality.first_divergence([1, 2, 3, 4], [1, 2]) == 0.5
    assert quality.first_divergence([], [1]) == 0.0


def test_first_divergence_concatenates_turns():
    r = record([[1, 2], [3, 4]], [[1, 2], [3, 5]])
    assert quality.record_first_divergence(r) == 0.75


def test_logprob_gap_is_mean_per_token_difference():
    r = record([[1, 2]], [[1, 2, 3, 4]], lp=[-2.0], slp=[-2.0])
    assert quality.mean_logprob(r, "method") == -1.0
    assert quality.logprob_gap(r) == pytest.approx(-1.0 + 0.5)
    same = record([[1, 2], [3]], [[1, 2], [3]], lp=[-1.25, -0.5], slp=[-1.25, -0.5])
    assert quality.logprob_gap(same) == 0.0


def test_logprob_gap_not_measured_without_the_field():
    assert math.isnan(quality.logprob_gap(record([[1]], [[1]])))
    assert math.isnan(
        quality.logprob_gap(record([[1], [2]], [[1], [2]], lp=[-1.0], slp=[-1.0, -1.0]))
    )


def test_agreement_reads_the_record():
    assert quality.agreement({"agreement": 1.0}) == 1.0
    assert quality.agreement({"agreement": 0.0}) == 0.0
    assert math.isnan(quality.agreement({"agreement": None}))
    assert math.isnan(quality.agreement({}))
    assert quality.measured([1.0, math.nan, 0.0]) == [1.0, 0.0]


def test_numeric_answers_agree_on_the_final_number():
    assert numeric_answers_agree("so 3 + 4 = 7. The answer is 7.", "The answer is 7.00")
    assert numeric_answers_agree("The answer is 1,000", "total 5 ... #### 1000")
    assert not numeric_answers_agree("The answer is 7.", "The answer is 8.")
    assert not numeric_answers_agree("The answer is 7.", "no number")
    assert numeric_answers_agree("no number", "nothing either")


def test_boxed_answers_agree_under_math_verify():
    assert boxed_answers_agree("so \\boxed{\\frac{1}{2}}", "it is \\boxed{0.5}")
    assert not boxed_answers_agree("\\boxed{3}", "\\boxed{4}")
    assert not boxed_answers_agree("\\boxed{3}", "no box")
    assert boxed_answers_agree("no box", "none")


def test_repeated_ngram_share_counts_ngrams_that_repeat_an_earlier_one() -> None:
    assert quality.repeated_ngram_share([1, 2, 3, 4, 5, 6]) == 0.0
    assert quality.repeated_ngram_share([7, 7, 7, 7, 7, 7, 7]) == pytest.approx(3 / 4)
    assert quality.repeated_ngram_share([1, 2, 1, 2, 1], n=2) == pytest.approx(2 / 4)
    assert quality.repeated_ngram_share([1, 2]) == 0.0  # shorter than n


def test_asd_repetition_script_compares_lossy_outputs_with_strict(tmp_path, capsys) -> None:
    import json

    from tests.scripts import load_script

    loop = {"tokens": [5, 6] * 8, "stop_reason": "length"}
    plain = {"tokens": list(range(16)), "stop_reason": "eos"}
    rec = {"id": "a", "status": "ok", "strict": {"turns": [plain]}, "method": {"turns": [loop]}}
    (tmp_path / "prompts.jsonl").write_text(json.dumps(rec) + "\n")
    assert load_script("asd_repetition").main([str(tmp_path)]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "| 1 | 16 → 16 | 1 → 0 | 0.00 → 0.85 |" in line


def test_output_stats_cover_finished_prompts_with_both_sides_only() -> None:
    loop = {"tokens": [5, 6] * 8, "stop_reason": "length"}
    short = {"tokens": [1, 2, 3, 4], "stop_reason": "eos"}
    done = {"status": "ok", "strict": {"turns": [short]}, "method": {"turns": [loop]}}
    failed = {**done, "status": "failed"}
    unpaired = {"status": "ok", "method": {"turns": [short]}}
    strict = quality.output_stats([done, failed, unpaired], "strict")
    lossy = quality.output_stats([done, failed, unpaired], "method")
    assert strict == {"length": 4, "stopped": 1, "repeat4": 0.0}
    assert lossy["length"] == 16 and lossy["stopped"] == 0
    assert lossy["repeat4"] == pytest.approx(11 / 13)
    assert math.isnan(quality.output_stats([], "method")["length"])
