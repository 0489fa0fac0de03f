"""The task protocol and the shared prompt selection / rendering code."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, ClassVar

from racer_bench.errors import ConfigError


@dataclass
class Prompt:
    """One benchmark item.

    Attributes:
        id: stable identifier (used to pair runs and to resume).
        category: benchmark category (Spec-Bench's 13, or the task name).
        turns: user messages; multi-turn prompts are answered turn by turn.
        reference: task-specific gold data (answer, tests, ...); never shown to the model.
    """

    id: str
    category: str
    turns: list[str]
    reference: dict[str, Any] = field(default_factory=dict)


class Task:
    """Base class: subclasses implement :meth:`load_all`, and may override rendering and scoring.

    Args:
        limit: keep the first ``limit`` prompts after category filtering (None = all).
        categories: keep only these categories (None = all).
        max_new_tokens: per-task override of the run-level value (None = keep it).
        stop_strings: strings that end a turn; the output text is cut before them.
        prompt_style: ``chat`` (the tokenizer's own chat template) or ``completion`` (raw text).
        sample_seed: when set, ``limit`` draws a seeded random subset instead of the first rows.
    """

    name: ClassVar[str] = "task"
    metric: ClassVar[str | None] = None  # headline score name in the summary, e.g. "pass@1"

    def __init__(
        self,
        version: str = "1",
        limit: int | None = None,
        categories: list[str] | None = None,
        max_new_tokens: int | None = None,
        stop_strings: list[str] | None = None,
        prompt_style: str = "chat",
        sample_seed: int | None = None,
        **_: Any,
    ) -> None:
        if limit is not None and limit < 0:
            raise ConfigError(f"task.limit={limit}: must be a non-negative integer or null")
        if prompt_style not in ("chat", "completion"):
            raise ConfigError(f"task.prompt_style={prompt_style}: allowed are chat, completion")
        self.version = str(version)
        self.limit = limit
        self.categories = list(categories) if categories else None
        self.max_new_tokens = max_new_tokens
        self.stop_strings = list(stop_strings or [])
        self.prompt_style = prompt_style
        self.sample_seed = sample_seed

    def load_all(self) -> list[Prompt]:
        raise NotImplementedError

    def load(self) -> list[Prompt]:
        """The selected prompts: category filter, then ``limit`` (first N or a seeded sample)."""
        prompts = self.load_all()
        if self.categories:
            known = sorted({p.category for p in prompts})
            unknown = [c for c in self.categories if c not in known]
            if unknown:
                raise ConfigError(
                    f"task.categories: unknown {', '.join(unknown)}; allowed: {', '.join(known)}"
                )
            prompts = [p for p in prompts if p.category in self.categories]
        if self.limit is not None and self.limit < len(prompts):
            if self.sample_seed is None:
                prompts = prompts[: self.limit]
            else:
                picked = sorted(random.Random(self.sample_seed).sample(range(len(prompts)), self.limit))
                prompts = [prompts[i] for i in picked]
        return prompts

    def render(self, prompt: Prompt, turn: int, history: list[str], tokenizer: Any) -> list[int]:
        """Token ids for ``turn`` given the model's own answers to earlier turns (``history``)."""
        if self.prompt_style == "completion" or not getattr(tokenizer, "chat_template", None):
            return completion_ids(prompt.turns, turn, history, tokenizer)
        messages: list[dict[str, str]] = []
        for i in range(turn + 1):
            messages.append({"role": "user", "content": prompt.turns[i]})
            if i < turn:
                messages.append({"role": "assistant", "content": history[i]})
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return tokenizer.encode(text, add_special_tokens=False)

    def score(self, prompt: Prompt, outputs: list[str]) -> dict[str, float]:
        """Scores of the final outputs (one per turn); speed-only tasks return ``{}``."""
        return {}


def completion_ids(turns: list[str], turn: int, history: list[str], tokenizer: Any) -> list[int]:
    """Plain-text prompt for base models: earlier turns and answers joined by blank lines."""
    parts: list[str] = []
    for i in range(turn):
        parts += [turns[i], history[i]]
    parts.append(turns[turn])
    return tokenizer.encode("\n\n".join(parts), add_special_tokens=True)
