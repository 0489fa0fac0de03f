"""A task long enough to be stopped mid-run at chosen moments (fault-injection tests)."""

from __future__ import annotations

import time
from typing import Any, ClassVar

from racer_bench.config.schema import NonNegativeFloat, PositiveInt
from racer_bench.tasks.base import Prompt
from racer_bench.tasks.tiny import TinyTask


class SlowTinyTask(TinyTask):
    """The tiny task's prompts ``copies`` times over; each turn renders ``delay_s`` late."""

    name: ClassVar[str] = "slow_tiny"

    def __init__(self, delay_s: NonNegativeFloat = 0.0, copies: PositiveInt = 1, **kwargs: Any):
        super().__init__(**kwargs)
        self.delay_s, self.copies = delay_s, copies

    def load_all(self) -> list[Prompt]:
        base = super().load_all()
        return [
            Prompt(f"{p.id}#{k}", p.category, p.turns) for k in range(self.copies) for p in base
        ]

    def render(self, prompt: Prompt, turn: int, history: list[str], tokenizer: Any) -> list[int]:
        time.sleep(self.delay_s)
        return super().render(prompt, turn, history, tokenizer)
