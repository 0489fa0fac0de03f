"""A built-in smoke-test task: a handful of prompts with repeated phrases, no data file."""

from __future__ import annotations

from typing import ClassVar

from racer_bench.tasks.base import Prompt, Task

# Repeated phrases give retrieval-based drafters something to match; one prompt has two turns
# so the multi-turn path is exercised too.
TINY_TURNS: tuple[tuple[str, ...], ...] = (
    ("the cat sat on the mat. the cat sat on the mat. the cat sat on the",),
    ("def add(a, b):\n    return a + b\n\ndef add(",),
    ("one two three four five one two three four five one two",),
    ("abc abc abc abc abc xyz abc abc", "xyz xyz abc xyz xyz abc xyz"),
    ("to be or not to be, to be or not to be, that is",),
    ("red green blue red green blue red green",),
)


class TinyTask(Task):
    """Six prompts in category ``tiny``; the score says whether the output is non-empty.

    Its "answer" (for answer agreement with strict greedy) is the final output's last line.
    """

    name: ClassVar[str] = "tiny"
    metric: ClassVar[str | None] = "nonempty"
    agreement_from_text: ClassVar[bool] = True

    def load_all(self) -> list[Prompt]:
        return [
            Prompt(id=f"tiny/{i}", category="tiny", turns=list(turns))
            for i, turns in enumerate(TINY_TURNS)
        ]

    def score(self, prompt: Prompt, outputs: list[str]) -> dict[str, float]:
        return {"nonempty": float(all(out.strip() for out in outputs))}

    def agreement(self, prompt: Prompt, outputs: list[str], reference: list[str]) -> float | None:
        """A stand-in answer for smoke runs: the last non-empty line of the final output."""
        return float(last_line(outputs[-1]) == last_line(reference[-1]))


def last_line(text: str) -> str:
    """The last line of ``text`` that is not blank, stripped ("" when there is none)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
