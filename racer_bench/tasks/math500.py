"""MATH-500 (Lightman et al. 2023, the PRM800K 500-problem split of Hendrycks et al.'s MATH).

Zero-shot with an instruction to put the final answer in ``\\boxed{}``; scored by extracting
the last box and checking symbolic equivalence with the gold answer through ``math-verify``
(:func:`racer_bench.tasks.scoring.score_boxed`). Categories are the 7 MATH subjects as they appear
in ``unique_id`` (``algebra``, ``counting_and_probability``, ..., ``precalculus``).
"""

from __future__ import annotations

import json
from typing import ClassVar

from racer_bench.tasks.base import Prompt, Task, conversation
from racer_bench.tasks.scoring import boxed_answers_agree, score_boxed

INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


class Math500Task(Task):
    """MATH-500, read from ``<data_dir>/math500/test.jsonl``."""

    name: ClassVar[str] = "math500"
    metric: ClassVar[str | None] = "accuracy"
    agreement_from_text: ClassVar[bool] = True

    def load_all(self) -> list[Prompt]:
        with self.data_path().open(encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        return [
            Prompt(
                id=row["unique_id"],
                category=row["unique_id"].split("/")[1],
                turns=[row["problem"]],
                reference={
                    "answer": row["answer"],
                    "solution": row["solution"],
                    "level": row["level"],
                },
            )
            for row in rows
        ]

    def chat_messages(self, prompt: Prompt, turn: int, history: list[str]) -> list[dict[str, str]]:
        turns = [f"{t}\n\n{INSTRUCTION}" for t in prompt.turns]
        return conversation(turns, turn, history)

    def completion_text(self, prompt: Prompt, turn: int, history: list[str]) -> str:
        return f"{INSTRUCTION}\n\nProblem:\n{prompt.turns[turn]}\n\nSolution:"

    def score(self, prompt: Prompt, outputs: list[str]) -> dict[str, float]:
        return score_boxed(outputs[-1], prompt.reference["answer"])

    def agreement(self, prompt: Prompt, outputs: list[str], reference: list[str]) -> float | None:
        """The last ``\\boxed{}`` is equivalent (math-verify) to strict greedy's."""
        return float(boxed_answers_agree(outputs[-1], reference[-1]))
