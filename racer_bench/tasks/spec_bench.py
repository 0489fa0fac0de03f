"""Spec-Bench (Xia et al. 2024): 480 questions in 13 categories; speed only, no score.

The 8 MT-Bench categories (80 questions, ids 81-160) have two turns: turn 2 is rendered with
the model's own turn-1 answer (``history``), as in Spec-Bench's ``eval.py``, and the runner
adds times and tokens over turns. There is no ``mt_bench`` label in the file; reports merge the
8 categories into ``multi_turn`` (as RACER's tables do) through :func:`report_category`, and
``task.categories=[multi_turn]`` selects them.
"""

from __future__ import annotations

import json
from typing import ClassVar

from racer_bench.tasks.base import Prompt, Task

MT_BENCH_CATEGORIES: tuple[str, ...] = (
    "writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities",
)  # fmt: skip
SINGLE_TURN_CATEGORIES: tuple[str, ...] = (
    "translation", "summarization", "qa", "math_reasoning", "rag",
)  # fmt: skip
MULTI_TURN = "multi_turn"


def report_category(category: str) -> str:
    """Reporting group of a Spec-Bench category: the 8 MT-Bench ones -> ``multi_turn``."""
    return MULTI_TURN if category in MT_BENCH_CATEGORIES else category


class SpecBenchTask(Task):
    """Spec-Bench, read from ``<data_dir>/spec_bench/question.jsonl``."""

    name: ClassVar[str] = "spec_bench"
    metric: ClassVar[str | None] = None
    category_aliases: ClassVar[dict[str, tuple[str, ...]]] = {MULTI_TURN: MT_BENCH_CATEGORIES}

    def report_category(self, category: str) -> str:
        return report_category(category)

    def load_all(self) -> list[Prompt]:
        with self.data_path().open(encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        return [
            Prompt(
                id=str(row["question_id"]),
                category=row["category"],
                turns=list(row["turns"]),
                reference={"reference": row["reference"]} if "reference" in row else {},
            )
            for row in rows
        ]

    def completion_text(self, prompt: Prompt, turn: int, history: list[str]) -> str:
        # Base models get a plain USER/ASSISTANT transcript (the shape of Spec-Bench's vicuna
        # template) so they answer instead of continuing the question.
        parts = []
        for i in range(turn):
            parts.append(f"USER: {prompt.turns[i]}\nASSISTANT: {history[i]}")
        parts.append(f"USER: {prompt.turns[turn]}\nASSISTANT:")
        return "\n".join(parts)
