"""The one conversation loop: every turn of a prompt rendered with the history of its own earlier
answers. Our decode loop, transformers' ``generate()``, vLLM's batches and the replay of
recorded drafts all generate through it, so a multi-turn prompt is rendered the same way by
every contender."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from racer_bench.tasks.base import Prompt, Task

Turn = dict[str, Any]  # a turn record: at least "text" (what later turns see)
AnswerBatch = Callable[[list[list[int]]], Sequence[Turn]]  # token ids per prompt -> turns


def conversations(
    prompts: Sequence[Prompt], task: Task, tokenizer: Any, answer: AnswerBatch
) -> list[list[Turn]]:
    """Every turn of each prompt, turn by turn across the batch: ``answer`` gets the rendered
    token ids of the prompts that still have a turn and returns one turn record each."""
    out: list[list[Turn]] = [[] for _ in prompts]
    for turn in range(max((len(p.turns) for p in prompts), default=0)):
        active = [i for i, p in enumerate(prompts) if turn < len(p.turns)]
        ids = [task.render(prompts[i], turn, history(out[i]), tokenizer) for i in active]
        for i, record in zip(active, answer(ids), strict=True):
            out[i].append(record)
    return out


def conversation(
    prompt: Prompt, task: Task, tokenizer: Any, answer: Callable[[list[int]], Turn]
) -> list[Turn]:
    """Every turn of one prompt (:func:`conversations` with a batch of one)."""
    return conversations([prompt], task, tokenizer, lambda ids: [answer(ids[0])])[0]


def history(turns: Sequence[Turn]) -> list[str]:
    """The earlier answers a next turn is rendered with."""
    return [t["text"] for t in turns]
