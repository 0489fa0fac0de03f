"""Test doubles and inputs shared by several test folders."""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from racer_bench.engine.drafter import DrafterNeeds
from racer_bench.engine.structs import Draft, DraftContext, Feedback, Source
from tests.conftest import TINY_PROMPTS, ar_tokens


class OracleDrafter:
    """Test drafter: proposes a known continuation (e.g. the target's own greedy output).

    With the target's greedy output every draft is fully accepted, so MAT = depth + 1. Set
    ``corrupt_every`` to flip every n-th draft token and exercise partial acceptance, and
    ``width`` > 1 to add wrong sibling branches under every node of the chain.
    """

    name: ClassVar[str] = "oracle"
    version: ClassVar[str] = "1"
    needs = DrafterNeeds()

    def __init__(
        self,
        continuation: list[int],
        prompt_len: int,
        depth: int = 8,
        corrupt_every: int = 0,
        width: int = 1,
        vocab_size: int = 256,
    ) -> None:
        self.continuation = continuation
        self.prompt_len = prompt_len
        self.depth = depth
        self.corrupt_every = corrupt_every
        self.width = width
        self.vocab_size = vocab_size

    def reset(self, prompt_ids: list[int], prompt_topk: torch.Tensor | None) -> None:
        self.prompt_len = len(prompt_ids)

    def propose(self, ctx: DraftContext) -> Draft:
        start = len(ctx.tokens) - self.prompt_len  # index of the token after the root
        chain = self.continuation[start : start + min(self.depth, ctx.max_depth)]
        if self.corrupt_every:
            chain = [
                (t + 1) % self.vocab_size if (i + 1) % self.corrupt_every == 0 else t
                for i, t in enumerate(chain)
            ]
        tokens: list[int] = []
        parents: list[int] = []
        prev = -1
        for t in chain:
            for w in range(self.width - 1, -1, -1):  # wrong siblings first, the true node last
                if len(tokens) >= ctx.budget:
                    break
                tokens.append((t + w) % self.vocab_size)
                parents.append(prev)
            if len(tokens) >= ctx.budget:
                break
            prev = len(tokens) - 1
        return Draft(
            tokens=torch.tensor(tokens, dtype=torch.long),
            parents=torch.tensor(parents, dtype=torch.long),
            source=torch.full((len(tokens),), int(Source.OTHER), dtype=torch.int32),
        )

    def update(self, fb: Feedback) -> None:
        pass


def copyable_prompt(target: Any) -> list[int]:
    """A tiny-model prompt whose greedy continuation starts with a bigram it already contains
    (so PLD, SuffixDecoding and SAM can copy it)."""
    base = list(TINY_PROMPTS[2])
    x = base
    for _ in range(8):
        greedy = ar_tokens(target, x, max_new_tokens=3)
        if any(x[i : i + 2] == greedy[:2] for i in range(len(x) - 1)):
            return x
        x = base[: len(base) // 2] + greedy + base[len(base) // 2 :]
    raise AssertionError("no prompt found whose greedy continuation can be copied")
