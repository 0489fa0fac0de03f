"""Strict greedy verification: the longest draft path the target's argmax agrees with.

``verify(draft, logits, rng)`` gets ``logits[N+1, V]`` where row 0 is the target's prediction
after the root and row ``i + 1`` the prediction after node ``i``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import torch

from racer_bench.engine.structs import Draft, VerifyResult
from racer_bench.engine.tree import path_to


def greedy_accept(
    tokens: Sequence[int], parents: Sequence[int], argmax: Sequence[int]
) -> tuple[list[int], int]:
    """Longest root path whose every node equals its parent's argmax.

    Args:
        tokens: node tokens, length N.
        parents: parent array, length N.
        argmax: target argmax after the root (index 0) and after each node (index i + 1).

    Returns:
        (accepted node indices root->leaf, bonus token). Ties between equally deep paths go to
        the first node in order, as in the reference implementations.
    """
    ok = [False] * len(tokens)
    depth = [0] * len(tokens)
    best, best_depth = -1, 0
    for i, p in enumerate(parents):
        if (p < 0 or ok[p]) and tokens[i] == argmax[p + 1]:
            ok[i] = True
            depth[i] = 1 if p < 0 else depth[p] + 1
            if depth[i] > best_depth:
                best, best_depth = i, depth[i]
    return path_to(best, parents), argmax[best + 1]


class GreedyVerifier:
    """Strict greedy verification: lossless with respect to greedy autoregressive decoding."""

    name: ClassVar[str] = "greedy"
    lossless: ClassVar[bool] = True

    def reset(self) -> None:
        pass

    def verify(self, draft: Draft, logits: torch.Tensor, rng: torch.Generator) -> VerifyResult:
        argmax = logits.argmax(dim=-1).tolist()
        accepted, bonus = greedy_accept(draft.tokens.tolist(), draft.parents.tolist(), argmax)
        return VerifyResult(accepted=accepted, bonus=bonus)
