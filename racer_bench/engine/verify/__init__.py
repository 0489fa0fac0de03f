"""Verifiers decide which draft nodes are accepted; they never touch the model or the cache.

``verify(draft, logits, rng)`` gets ``logits[N+1, V]`` where row 0 is the target's prediction
after the root and row ``i + 1`` the prediction after node ``i``. Strict greedy
(:mod:`.greedy`), lossless sampling (:mod:`.sampling`), Approximate Speculative Decoding
(:mod:`.asd`).
"""

from __future__ import annotations

from typing import ClassVar, Protocol, runtime_checkable

import torch

from racer_bench.engine.structs import Draft, VerifyResult


@runtime_checkable
class Verifier(Protocol):
    """Decides acceptance for one step."""

    name: ClassVar[str]
    lossless: ClassVar[bool]

    def reset(self) -> None:
        """Start a new request (per-request state such as ASD's regret ledger)."""

    def verify(self, draft: Draft, logits: torch.Tensor, rng: torch.Generator) -> VerifyResult:
        """Pick the accepted path and the bonus token from ``logits[N+1, V]``."""
