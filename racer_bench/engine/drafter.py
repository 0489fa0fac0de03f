"""The drafter protocol: drafters only propose and learn.

A drafter never calls the target, never touches the KV cache and never decides acceptance. The
decode loop reads :class:`DrafterNeeds` and computes only what a drafter asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol, runtime_checkable

import torch

from racer_bench.engine.structs import Draft, DraftContext, Feedback

BACKENDS: tuple[str, ...] = ("native", "vllm")  # the engines of conf/backend


@dataclass(frozen=True)
class DrafterNeeds:
    """What the loop must compute for a drafter.

    Attributes:
        topk: width of the target top-k exported at the prompt (``prefill_topk``), at the root
            (``DraftContext.root_topk``) and at every verified node (``Feedback.node_topk``);
            0 = none.
        prefill_topk: whether the top-k of every prompt position is passed to ``reset``.
        node_topk: whether ``Feedback.node_topk`` is filled (top-k of every verified row, about
            as costly as the verifier's argmax); False = only the next root's top-k is computed.
        hidden_states: whether the target must return hidden states (model-based drafters):
            the prompt's on the first ``DraftContext.hidden``, every verified row's on
            ``Feedback.hidden``.
        hidden_layers: indices into the model's ``hidden_states`` tuple (0 = embeddings, -1 =
            the final normed state) concatenated along the feature axis; empty = the final
            normed state only (what the LM head reads).
        backends: the engines (:data:`BACKENDS`) the drafter runs on, read by
            :func:`runs_on`; None = every engine that can give it what it needs: only
            ``native`` with ``hidden_states`` (vLLM's custom proposer gets no hidden states),
            else all.
    """

    topk: int = 0
    prefill_topk: bool = False
    node_topk: bool = True
    hidden_states: bool = False
    hidden_layers: tuple[int, ...] = ()
    backends: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.backends is None:
            object.__setattr__(self, "backends", ("native",) if self.hidden_states else BACKENDS)
        elif self.hidden_states and "vllm" in self.backends:
            raise ValueError("a drafter that needs hidden states cannot run on vllm")


def runs_on(drafter: object, backend: str) -> bool:
    """Whether ``drafter`` runs on the engine ``backend`` (a name of :data:`BACKENDS`), as its
    ``needs.backends`` declares; an object without ``needs`` runs on every engine."""
    needs = getattr(drafter, "needs", None)
    declared = BACKENDS if needs is None else needs.backends
    return backend in (declared or ())


@runtime_checkable
class Drafter(Protocol):
    """Proposes draft trees and learns from verification feedback."""

    name: ClassVar[str]
    version: ClassVar[str]
    needs: DrafterNeeds
    capacity: int  # the most nodes one draft may hold (conformance tests check it)

    def reset(self, prompt_ids: list[int], prompt_topk: torch.Tensor | None) -> None:
        """Start a new generation; ``prompt_topk`` is LongTensor[L, k] or None."""

    def propose(self, ctx: DraftContext) -> Draft:
        """Return a draft of at most ``ctx.budget`` nodes and depth ``ctx.max_depth``."""

    def update(self, fb: Feedback) -> None:
        """Learn from one verified step."""


class NullDrafter:
    """The autoregressive baseline: proposes nothing, so every step emits one token."""

    name: ClassVar[str] = "ar"
    version: ClassVar[str] = "1"
    needs = DrafterNeeds()

    capacity = 0

    def __init__(self, vocab_size: int | None = None, **_: object) -> None:
        self.vocab_size = vocab_size

    def reset(self, prompt_ids: list[int], prompt_topk: torch.Tensor | None) -> None:
        pass

    def propose(self, ctx: DraftContext) -> Draft:
        return Draft.empty()

    def update(self, fb: Feedback) -> None:
        pass
