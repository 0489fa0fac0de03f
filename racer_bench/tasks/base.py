"""The task protocol and the shared prompt selection / rendering code.

Selection order in :meth:`Task.load`: categories, then split, then limit.

* ``categories``: keep these categories (a task may define aliases, e.g. Spec-Bench's
  ``multi_turn`` = its 8 MT-Bench categories).
* ``split``: ``calib`` / ``eval`` / ``all``. A prompt is in ``calib`` when the first 8 bytes of
  ``sha256("<task>:<prompt id>")``, read as a fraction of 2**64, fall below ``calib_fraction``
  (default 0.3), else in ``eval``. The split is disjoint, covers the task, and does not move
  when rows are added or reordered, so a sweep can pick controls on ``calib`` and report ``eval``.
* ``limit``: the first N prompts (N >= 1; null: all), or with ``sample_seed`` set a seeded,
  category-balanced sample (round-robin over categories, each shuffled with
  ``random.Random(sample_seed)``), kept in file order.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from annotated_types import Interval

from racer_bench.config.schema import PositiveInt, Seed, format_value
from racer_bench.errors import ConfigError
from racer_bench.tasks.datafiles import data_file

SPLITS = ("all", "calib", "eval")
PROMPT_STYLES = ("chat", "completion")


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


def split_of(task: str, prompt_id: str, calib_fraction: float) -> str:
    """``"calib"`` or ``"eval"``: a stable hash of ``task:prompt_id`` (see module docstring)."""
    digest = hashlib.sha256(f"{task}:{prompt_id}".encode()).digest()
    return "calib" if int.from_bytes(digest[:8], "big") < calib_fraction * 2**64 else "eval"


def balanced_sample(prompts: list[Prompt], limit: int, seed: int) -> list[Prompt]:
    """``limit`` prompts, round-robin over categories (each shuffled by ``seed``), file order."""
    rng = random.Random(seed)
    groups: dict[str, list[int]] = {}
    for i, p in enumerate(prompts):
        groups.setdefault(p.category, []).append(i)
    for indices in groups.values():
        rng.shuffle(indices)
    picked: list[int] = []
    rounds = max(len(g) for g in groups.values())
    for r in range(rounds):
        picked += [g[r] for g in groups.values() if r < len(g)]
    return [prompts[i] for i in sorted(picked[:limit])]


class Task:
    """Base class: subclasses implement :meth:`load_all`, and may override rendering and scoring.

    Args:
        version: task version, recorded with every result (bump when prompts or scoring change).
        limit: keep ``limit`` (>= 1) prompts after category and split filtering (None = all).
        categories: keep only these categories (None = all).
        max_new_tokens: per-task override of the run-level value (None = keep it).
        stop_strings: strings that end a turn; the output text is cut before them.
        prompt_style: ``chat`` (the tokenizer's own chat template) or ``completion`` (raw text).
        sample_seed: when set, ``limit`` draws a seeded, category-balanced sample.
        split: ``all``, ``calib`` (~``calib_fraction`` of prompts) or ``eval`` (the rest).
        calib_fraction: share of prompts in the calib split.
        data_dir: the data directory (None = ``$RACER_BENCH_DATA`` or ``./data``).
    """

    name: ClassVar[str] = "task"
    metric: ClassVar[str | None] = None  # headline score name in the summary, e.g. "pass@1"
    category_aliases: ClassVar[dict[str, tuple[str, ...]]] = {}  # name -> member categories
    # agreement() reads only the two texts (no reference, no execution): it can be recomputed
    # from recorded outputs (racer_bench.analysis.frames)
    agreement_from_text: ClassVar[bool] = False

    def __init__(
        self,
        version: str = "1",
        limit: PositiveInt | None = None,
        categories: Sequence[str] | str | None = None,
        max_new_tokens: PositiveInt | None = None,
        stop_strings: Sequence[str] | None = None,
        prompt_style: Literal["chat", "completion"] = "chat",
        sample_seed: Seed | None = None,
        split: Literal["all", "calib", "eval"] = "all",
        calib_fraction: Annotated[float, Interval(gt=0, lt=1)] = 0.3,
        data_dir: str | None = None,
        **_: Any,
    ) -> None:
        _check_choice("prompt_style", prompt_style, PROMPT_STYLES)
        _check_choice("split", split, SPLITS)
        if limit is not None and (not isinstance(limit, int) or limit < 1):
            raise ConfigError(f"task.limit={limit}: must be an integer >= 1 or null")
        if not 0.0 < calib_fraction < 1.0:
            raise ConfigError(f"task.calib_fraction={calib_fraction}: must be in (0, 1)")
        if isinstance(categories, str):
            categories = [categories]
        self.version = str(version)
        self.limit = limit
        self.categories = list(categories) if categories else None
        self.max_new_tokens = max_new_tokens
        self.stop_strings = list(stop_strings or [])
        self.prompt_style = prompt_style
        self.sample_seed = sample_seed
        self.split = split
        self.calib_fraction = calib_fraction
        self.data_dir = data_dir

    def load_all(self) -> list[Prompt]:
        raise NotImplementedError

    def data_path(self) -> Path:
        """This task's file in the data directory (one-line ConfigError if it is missing)."""
        return data_file(self.name, self.data_dir)

    def load(self) -> list[Prompt]:
        """The selected prompts: categories, then split, then ``limit`` (module docstring)."""
        prompts = self.select_categories(self.load_all())
        if self.split != "all":
            prompts = [
                p for p in prompts if split_of(self.name, p.id, self.calib_fraction) == self.split
            ]
        if self.limit is not None and self.limit < len(prompts):
            if self.sample_seed is None:
                prompts = prompts[: self.limit]
            else:
                prompts = balanced_sample(prompts, self.limit, self.sample_seed)
        return prompts

    def check(self) -> None:
        """Refuse, in one line, what only the prompts can judge: a missing data file, an unknown
        category, a selection that keeps no prompt. Runs before the model loads
        (:func:`racer_bench.run.config.validate`), so it reads the prompts once more."""
        if not self.load():
            chosen = f"categories={format_value(self.categories)}, split={self.split}"
            raise ConfigError(f"task: {chosen} keep no prompt of {self.name}; "
                              "allowed: a selection of at least one prompt")  # fmt: skip

    def select_categories(self, prompts: list[Prompt]) -> list[Prompt]:
        """Prompts of ``self.categories`` (aliases expanded); unknown names raise ConfigError."""
        if not self.categories:
            return prompts
        known = sorted({p.category for p in prompts})
        wanted: set[str] = set()
        for name in self.categories:
            if name in self.category_aliases:
                wanted.update(self.category_aliases[name])
            elif name in known:
                wanted.add(name)
            else:
                allowed = ", ".join([*known, *self.category_aliases])
                raise ConfigError(f"task.categories: unknown {name}; allowed: {allowed}")
        return [p for p in prompts if p.category in wanted]

    def render(self, prompt: Prompt, turn: int, history: list[str], tokenizer: Any) -> list[int]:
        """Token ids for ``turn`` given the model's own answers to earlier turns (``history``)."""
        if self.prompt_style == "completion" or not getattr(tokenizer, "chat_template", None):
            text = self.completion_text(prompt, turn, history)
            return tokenizer.encode(text, add_special_tokens=True)
        messages = self.chat_messages(prompt, turn, history)
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return tokenizer.encode(text, add_special_tokens=False)

    def chat_messages(self, prompt: Prompt, turn: int, history: list[str]) -> list[dict[str, str]]:
        """Chat messages up to the user message of ``turn``."""
        return conversation(prompt.turns, turn, history)

    def completion_text(self, prompt: Prompt, turn: int, history: list[str]) -> str:
        """Plain-text prompt for base models: earlier turns and answers joined by blank lines."""
        parts: list[str] = []
        for i in range(turn):
            parts += [prompt.turns[i], history[i]]
        parts.append(prompt.turns[turn])
        return "\n\n".join(parts)

    def score(self, prompt: Prompt, outputs: list[str]) -> dict[str, float]:
        """Scores of the final outputs (one per turn); speed-only tasks return ``{}``."""
        return {}

    def agreement(self, prompt: Prompt, outputs: list[str], reference: list[str]) -> float | None:
        """1.0 when ``outputs`` give the same final answer as ``reference`` (strict greedy's
        outputs on the same prompt), else 0.0; None for tasks without an answer to compare."""
        return None

    def report_category(self, category: str) -> str:
        """Group a category is reported under (identity; Spec-Bench merges MT-Bench)."""
        return category


def conversation(turns: Sequence[str], turn: int, history: Sequence[str]) -> list[dict[str, str]]:
    """Alternating user/assistant messages: ``turns[0..turn]`` with ``history`` in between."""
    messages: list[dict[str, str]] = []
    for i in range(turn + 1):
        messages.append({"role": "user", "content": turns[i]})
        if i < turn:
            messages.append({"role": "assistant", "content": history[i]})
    return messages


def _check_choice(key: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ConfigError(f"task.{key}={value}: allowed are {', '.join(allowed)}")
