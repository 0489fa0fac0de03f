"""The scorers reproduce the references on the full data files.

Each dataset's own worked solution is fed through the task's answer extraction and scored
against the gold final answer: GSM8K must score 100 %, MATH-500 at least 98 % (failures are
listed in the assertion message), and MGSM-ZH answers phrased like the prompt's exemplars 100 %.
Shuffled gold answers must score low, so a scorer that accepts everything cannot pass.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from racer_bench.tasks.base import Prompt, Task
from racer_bench.tasks.datafiles import SOURCES
from racer_bench.tasks.gsm8k import GSM8KTask
from racer_bench.tasks.math500 import Math500Task
from racer_bench.tasks.mgsm import MGSMZhTask


def load(task_cls: type[Task]) -> tuple[Task, list[Prompt]]:
    root = os.environ.get("RACER_BENCH_DATA")
    rel = SOURCES[task_cls.name].relpath
    if not root or not (Path(root) / rel).is_file():
        pytest.skip(f"{task_cls.name}: {rel} not in RACER_BENCH_DATA={root}")
    task = task_cls()
    return task, task.load()


def accuracy(task: Task, prompts: list[Prompt], outputs: list[str]) -> tuple[float, list[str]]:
    failures = [
        p.id
        for p, out in zip(prompts, outputs, strict=True)
        if task.score(p, [out])["accuracy"] != 1.0
    ]
    return 1 - len(failures) / len(prompts), failures


def shuffled(prompts: list[Prompt]) -> list[Prompt]:
    """The same prompts with gold answers permuted (a negative control)."""
    answers = [p.reference["answer"] for p in prompts]
    random.Random(0).shuffle(answers)
    pairs = zip(prompts, answers, strict=True)
    return [Prompt(p.id, p.category, p.turns, {"answer": a}) for p, a in pairs]


def test_gsm8k_gold_solutions_score_100_percent():
    task, prompts = load(GSM8KTask)
    solutions = [p.reference["solution"] for p in prompts]
    acc, failures = accuracy(task, prompts, solutions)
    assert len(prompts) == 1319
    assert acc == 1.0, f"GSM8K gold solutions failing: {failures}"
    assert accuracy(task, shuffled(prompts), solutions)[0] < 0.1


def test_math500_gold_solutions_score_at_least_98_percent():
    task, prompts = load(Math500Task)
    solutions = [p.reference["solution"] for p in prompts]
    acc, failures = accuracy(task, prompts, solutions)
    assert len(prompts) == 500
    assert acc >= 0.98, f"MATH-500 gold solutions failing ({acc:.1%}): {failures}"
    assert accuracy(task, shuffled(prompts)[:100], solutions[:100])[0] < 0.1  # math-verify is slow


def exemplar_style_answer(task: MGSMZhTask, index: int, gold: str) -> str:
    """One of the prompt's own exemplar answers (numbers and all) with its final number -> gold."""
    _, answer = task.shots()[index % len(task.shots())]
    body, _, _ = answer.rpartition("答案是 ")
    return f"{body}答案是 {gold}。"


def test_mgsm_zh_exemplar_style_answers_score_100_percent():
    task, prompts = load(MGSMZhTask)
    raw_gold = [line.split("\t")[1].strip() for line in task.data_path().open(encoding="utf-8")]
    outputs = [exemplar_style_answer(task, i, g) for i, g in enumerate(raw_gold)]
    acc, failures = accuracy(task, prompts, outputs)
    assert len(prompts) == 250 and any("," in g for g in raw_gold)  # 2,125-style golds included
    assert acc == 1.0, f"MGSM-ZH exemplar-style answers failing: {failures}"
    assert accuracy(task, shuffled(prompts), outputs)[0] < 0.1
