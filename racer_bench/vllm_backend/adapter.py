"""Per-request drafter state for an engine that batches requests (vLLM).

vLLM hands a proposer, once per step, each batch row's full context (prompt + every committed
token). :class:`DrafterPool` keys a drafter by request id, turns "what was committed since my
last proposal" into the :class:`~racer_bench.engine.structs.Feedback` the native loop would have
given, and asks for the next chain. Pure: no vLLM import; tested with plain lists.

Drafters are reused: a finished request's drafter goes back to the pool and the next request
``reset``\\ s it, as the native loop reuses one drafter for a whole run, so cross-prompt state
(``persist_across_prompts``) carries over at batch 1 exactly as there.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from racer_bench.engine.drafter import Drafter
from racer_bench.engine.structs import Draft, DraftContext, Feedback, Source
from racer_bench.engine.tree import prune, select_nodes
from racer_bench.vllm_backend.budget import BatchBudget, ChainEstimate
from racer_bench.vllm_backend.chains import to_chain


@dataclass
class StepNote:
    """One proposer call for one request: how the last chain fared and what is proposed next.

    ``accepted`` is None on the request's first call (nothing was drafted yet) and -1 when vLLM
    committed tokens the chain cannot explain (a step in which the proposer was not called).
    """

    accepted: int | None
    accepted_retrieval: int
    proposed: int  # nodes in the drafter's tree
    chain: int  # nodes sent to vLLM (the projected chain)
    seconds: float  # time in the drafter (update + propose)
    fed_topk: bool  # the feedback carried the target's top-k
    has_retrieval: bool = False  # the chain holds a retrieval-sourced node

    def as_dict(self) -> dict[str, object]:
        return {"a": self.accepted, "ar": self.accepted_retrieval, "p": self.proposed,
                "c": self.chain, "t": round(self.seconds, 6), "k": int(self.fed_topk),
                "hr": int(self.has_retrieval)}  # fmt: skip


@dataclass
class RequestState:
    """One live request: its drafter, how much of its context the drafter has seen, its chain."""

    drafter: Drafter
    seen: int
    prompt_len: int
    chain: Draft | None = None
    estimate: ChainEstimate | None = None  # the uncut chain's survivals (with a budget)


def holds_retrieval(chain: Draft) -> bool:
    """Whether a chain holds a retrieval-sourced node."""
    sources = chain.source.tolist() if chain.source is not None else []
    return int(Source.RETRIEVAL) in sources


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class DrafterPool:
    """Drafter state per request id.

    Args:
        make_drafter: builds a fresh drafter (called when no idle one is left).
        max_chain: the most draft tokens per step (vLLM's ``num_speculative_tokens``).
        max_draft: the budget a drafter proposes its tree under (the native ``max_draft``).
        max_new_tokens: generation length, so drafts never run past it (None: no cap).
        budget: cuts each step's chains over the batch (``backend.draft_length=confidence``;
            None: every chain is verified whole).
    """

    def __init__(
        self,
        make_drafter: Callable[[], Drafter],
        max_chain: int,
        max_draft: int = 256,
        max_new_tokens: int | None = None,
        budget: BatchBudget | None = None,
    ) -> None:
        self.make_drafter = make_drafter
        self.budget = budget
        self.max_chain = max_chain
        self.max_draft = max_draft
        self.max_new_tokens = max_new_tokens
        self.live: dict[str, RequestState] = {}
        self.idle: list[Drafter] = []

    def propose(
        self, req_id: str, context: Sequence[int], prompt_len: int, topk: torch.Tensor | None
    ) -> tuple[list[int], StepNote]:
        """Feed the request's drafter what was committed since its last chain; return the next.

        Args:
            context: prompt + every committed token; the last one is the root.
            topk: LongTensor[m+1, k] or None -- the target's top-k at the root and at the ``m``
                chain positions vLLM verified this step (row ``j`` follows ``j`` chain tokens).
        Returns:
            (the chain's tokens, what happened in this call).
        """
        start = time.perf_counter()
        state = self.live.get(req_id)
        if state is None:
            state = self._start(req_id, context, prompt_len)
        accepted, retrieval, root_topk, fed = self._feed(state, context, topk)
        tree, chain = self._next_chain(state, context, root_topk)
        note = StepNote(accepted, retrieval, len(tree), len(chain), time.perf_counter() - start,
                        fed, holds_retrieval(chain))  # fmt: skip
        return chain.tokens.tolist(), note

    def cut(self, req_id: str, keep: int, note: StepNote) -> list[int]:
        """Verify only the first ``keep`` nodes of the request's chain; returns their tokens
        (``note`` is updated to the chain sent)."""
        state = self.live[req_id]
        assert state.chain is not None
        if keep < len(state.chain):
            state.chain = select_nodes(state.chain, list(range(keep)))
        note.chain, note.has_retrieval = len(state.chain), holds_retrieval(state.chain)
        return state.chain.tokens.tolist()

    def release_missing(self, active: set[str]) -> list[str]:
        """Requests no longer in the batch are finished: pool their drafters; return their ids."""
        gone = [r for r in self.live if r not in active]
        for req_id in gone:
            self.idle.append(self.live.pop(req_id).drafter)
        return gone

    def _start(self, req_id: str, context: Sequence[int], prompt_len: int) -> RequestState:
        drafter = self.idle.pop() if self.idle else self.make_drafter()
        drafter.reset(list(context[:prompt_len]), None)  # vLLM computes no prompt logits
        state = RequestState(drafter, seen=prompt_len, prompt_len=prompt_len)
        self.live[req_id] = state
        return state

    def _feed(
        self, state: RequestState, context: Sequence[int], topk: torch.Tensor | None
    ) -> tuple[int | None, int, torch.Tensor | None, bool]:
        """Give the drafter this step's feedback.

        Returns (accepted chain nodes or None/-1, of them retrieved, the new root's top-k, whether
        the feedback carried top-k).
        """
        new = list(context[state.seen :])
        state.seen = len(context)
        chain = state.chain
        if chain is None:  # the first token, from the prefill: no update, as in the native loop
            return None, 0, (topk[-1] if topk is not None and len(new) == 1 else None), False
        verified = len(chain) if topk is None else min(len(chain), topk.shape[0] - 1)
        accepted = min(common_prefix(chain.tokens[:verified].tolist(), new), len(new) - 1)
        if len(new) != accepted + 1:  # a step without a proposal: the drafter resyncs from ctx
            return -1, 0, None, False
        if self.budget is not None and state.estimate is not None:
            self.budget.learn(state.estimate, accepted, new)
        sources = chain.source.tolist()[:accepted] if chain.source is not None else []
        node_topk = topk[: verified + 1] if topk is not None else None
        shown = chain if verified >= len(chain) else select_nodes(chain, list(range(verified)))
        state.drafter.update(Feedback(shown, list(range(accepted)), new, node_topk))
        root_topk = topk[accepted] if topk is not None else None
        return accepted, sources.count(int(Source.RETRIEVAL)), root_topk, node_topk is not None

    def _next_chain(
        self, state: RequestState, context: Sequence[int], root_topk: torch.Tensor | None
    ) -> tuple[Draft, Draft]:
        """(the drafter's pruned tree, the chain projected from it)."""
        depth = self.max_chain
        if self.max_new_tokens is not None:
            room = self.max_new_tokens - (len(context) - state.prompt_len)
            depth = max(0, min(depth, room - 1))  # accepted + bonus must fit
        ctx = DraftContext(list(context), int(context[-1]), self.max_draft, depth, root_topk)
        tree = prune(state.drafter.propose(ctx), self.max_draft, depth)
        chain = to_chain(tree, depth)
        state.chain = chain
        state.estimate = self.budget.estimate(chain) if self.budget is not None else None
        return tree, chain
