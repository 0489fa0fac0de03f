"""GSM8K (Cobbe et al. 2021): few-shot chain-of-thought, accuracy (MGSM-ZH reuses it).

Prompt: the 8 fixed exemplars of :mod:`racer_bench.tasks.exemplars`, then the question. Chat
models see them as earlier user/assistant turns; base models see ``Q: ...\\nA: ...`` blocks
(``问题：`` / ``逐步解答：`` for MGSM-ZH) ending in an open answer line. Scoring: the number
after the last answer marker ("The answer is", "####", "答案是"), else the last number,
compared numerically with the gold (:func:`racer_bench.tasks.scoring.score_numeric`).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar

from annotated_types import Interval

from racer_bench.errors import ConfigError
from racer_bench.tasks.base import Prompt, Task, conversation
from racer_bench.tasks.exemplars import GSM8K_EXEMPLARS
from racer_bench.tasks.scoring import gsm8k_gold, numeric_answers_agree, score_numeric


class GSM8KTask(Task):
    """GSM8K test split (1,319 problems), read from ``<data_dir>/gsm8k/test.jsonl``.

    Args:
        num_fewshot: how many of the 8 fixed exemplars precede the question (0-8).
    """

    name: ClassVar[str] = "gsm8k"
    metric: ClassVar[str | None] = "accuracy"
    agreement_from_text: ClassVar[bool] = True
    question_prefix: ClassVar[str] = "Q: "
    answer_prefix: ClassVar[str] = "A: "
    exemplars: ClassVar[tuple[tuple[str, str], ...]] = GSM8K_EXEMPLARS

    def __init__(
        self, num_fewshot: Annotated[int, Interval(ge=0, le=8)] = 8, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        if not 0 <= num_fewshot <= len(self.exemplars):
            raise ConfigError(
                f"task.num_fewshot={num_fewshot}: must be in 0..{len(self.exemplars)}"
            )
        self.num_fewshot = num_fewshot

    def load_all(self) -> list[Prompt]:
        with self.data_path().open(encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        return [
            Prompt(
                id=f"{self.name}/{i:04d}",
                category=self.name,
                turns=[row["question"]],
                reference={"answer": gsm8k_gold(row["answer"]), "solution": row["answer"]},
            )
            for i, row in enumerate(rows)
        ]

    def shots(self) -> list[tuple[str, str]]:
        """The exemplars in use, with the question/answer prefixes applied."""
        return [
            (self.question_prefix + q, self.answer_prefix + a)
            for q, a in self.exemplars[: self.num_fewshot]
        ]

    def chat_messages(self, prompt: Prompt, turn: int, history: list[str]) -> list[dict[str, str]]:
        messages: list[dict[str, str]] = []
        for question, answer in self.shots():
            messages += [
                {"role": "user", "content": question},
                {"role": "assistant", "content": answer},
            ]
        turns = [self.question_prefix + t for t in prompt.turns]
        return messages + conversation(turns, turn, history)

    def completion_text(self, prompt: Prompt, turn: int, history: list[str]) -> str:
        blocks = [f"{q}\n{a}" for q, a in self.shots()]
        for i in range(turn):
            blocks.append(f"{self.question_prefix}{prompt.turns[i]}\n{history[i]}")
        open_answer = self.answer_prefix.rstrip()
        blocks.append(f"{self.question_prefix}{prompt.turns[turn]}\n{open_answer}")
        return "\n\n".join(blocks)

    def score(self, prompt: Prompt, outputs: list[str]) -> dict[str, float]:
        return score_numeric(outputs[-1], prompt.reference["answer"])

    def agreement(self, prompt: Prompt, outputs: list[str], reference: list[str]) -> float | None:
        """Same final number (the one :meth:`score` extracts) as strict greedy's answer."""
        return float(numeric_answers_agree(outputs[-1], reference[-1]))
