"""A recorded run as a replay reads it: its folder, records, task and tokenizer, turn by turn."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from racer_bench.config.construct import DISPLAY_KEYS, task_max_new_tokens
from racer_bench.replay.core import BIG_BUDGET
from racer_bench.tasks.base import Prompt
from racer_bench.tasks.conversation import conversation


@dataclass
class Turn:
    """One recorded turn: its rendered prompt ids, the AR output and the method's steps."""

    id: str
    turn: int
    prompt: list[int]
    output: list[int]
    recorded: list[int]  # the method's recorded n_committed per step (empty when not identical)


@dataclass
class ReplayRun:
    """A recorded run folder with what its replay needs: records, task and tokenizer."""

    folder: Path
    manifest: dict[str, Any]
    records: list[dict[str, Any]]
    tokenizer: Any
    vocab_size: int
    task: Any

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def max_new_tokens(self) -> int:
        return int(task_max_new_tokens(self.task, self.manifest["max_new_tokens"]))

    @property
    def budget(self) -> int:
        return int(self.manifest["config"].get("max_draft", BIG_BUDGET))

    def recorded_method(self) -> Any:
        from hydra.utils import instantiate

        method = self.manifest["config"]["method"]
        made = instantiate({k: v for k, v in method.items() if k not in DISPLAY_KEYS})
        return made(vocab_size=self.vocab_size) if callable(made) else made

    def turns(self, warmup: int) -> Iterator[Turn]:
        """Every turn of the ok records in file order, after the warm-up prompts (which the
        runner decodes before the recorded ones, with the same drafter)."""
        ok = [r for r in self.records if r.get("status") == "ok"]
        prompts = {p.id: p for p in self.task.load()}
        for r in [*ok[:warmup], *ok]:
            prompt = prompts[r.get("prompt_id", r["id"])]  # vLLM records: id names the batch size
            for i, (ids, t) in enumerate(self.rendered(prompt, r["baseline"]["turns"])):
                same = r.get("identical", False)
                recorded = r["method"]["turns"][i]["steps"]["n_committed"] if same else []
                yield Turn(r["id"], i, list(ids), list(t["tokens"]), list(recorded))

    def rendered(
        self, prompt: Prompt, answers: Sequence[dict[str, Any]]
    ) -> list[tuple[list[int], dict[str, Any]]]:
        """(prompt ids, recorded answer) of each turn: the conversation loop renders every
        turn with the recorded answers of the earlier ones as its history."""
        ids_of: list[list[int]] = []
        recorded = iter(answers)

        def answer(ids: list[int]) -> dict[str, Any]:
            ids_of.append(ids)
            return next(recorded)

        turns = conversation(prompt, self.task, self.tokenizer, answer)
        return list(zip(ids_of, turns, strict=True))
