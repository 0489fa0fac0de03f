"""llama-cpp-python's draft-model hook (``LlamaDraftModel``: ``__call__(input_ids) -> ids``)
around a chain proposer, with one note per call for the records.

llama-cpp-python calls the hook once per speculative step with the whole context (prompt and
every committed token; the last is the root) and evaluates the root and the returned chain in
one batch. :class:`DraftHook` turns each call into the proposer's input, hands the chain back,
and keeps notes in the shape of the vLLM proposer's step log, so
:func:`racer_bench.vllm_backend.step_records.steps_from_notes` makes the steps:

* :class:`PoolProposer` -- one of our drafters through the vLLM backend's
  :class:`~racer_bench.vllm_backend.adapter.DrafterPool` (trees cut to their best chain,
  :mod:`racer_bench.vllm_backend.chains`), fed the target's top-k at the verified positions
  from llama.cpp's logits where the drafter asks for it;
* :class:`LookupProposer` -- llama-cpp-python's own ``LlamaPromptLookupDecoding``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import torch

from racer_bench.engine.drafter import Drafter
from racer_bench.vllm_backend.adapter import DrafterPool, common_prefix

Note = dict[str, Any]


class ChainProposer(Protocol):
    """What :class:`DraftHook` asks for a chain."""

    def start(self, prompt_len: int) -> None:
        """A new generation from a prompt of ``prompt_len`` tokens."""

    def propose(self, context: list[int], topk: torch.Tensor | None) -> tuple[list[int], Note]:
        """The next chain after ``context`` and the note of this call."""


def top_k_rows(rows: np.ndarray, k: int) -> torch.Tensor:
    """LongTensor[rows, k]: each row's ``k`` largest logits' ids, largest first."""
    part = np.argpartition(-rows, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(rows, part, axis=1), axis=1, kind="stable")
    return torch.from_numpy(np.take_along_axis(part, order, axis=1).astype(np.int64))


class PoolProposer:
    """One of our drafters (a fresh request id per generation, the same drafter reused, as our
    loop reuses one drafter for a whole run); ``topk``: the width it asks for (0: none)."""

    def __init__(self, drafter: Drafter, max_chain: int, max_draft: int,
                 max_new_tokens: int) -> None:  # fmt: skip
        self.pool = DrafterPool(lambda: drafter, max_chain, max_draft, max_new_tokens)
        self.request, self.count, self.prompt_len = "", 0, 0
        self.topk = int(getattr(getattr(drafter, "needs", None), "topk", 0) or 0)

    def start(self, prompt_len: int) -> None:
        self.count += 1
        self.request, self.prompt_len = f"g{self.count}", prompt_len
        self.pool.release_missing({self.request})

    def propose(self, context: list[int], topk: torch.Tensor | None) -> tuple[list[int], Note]:
        chain, note = self.pool.propose(self.request, context, self.prompt_len, topk)
        return chain, note.as_dict()


class LookupProposer:
    """llama-cpp-python's ``LlamaPromptLookupDecoding``; accepted tokens counted here."""

    topk = 0

    def __init__(self, lookup: Callable[[np.ndarray], np.ndarray]) -> None:
        self.lookup = lookup
        self.seen, self.chain = 0, None

    def start(self, prompt_len: int) -> None:
        self.seen, self.chain = prompt_len, None

    def propose(self, context: list[int], topk: torch.Tensor | None) -> tuple[list[int], Note]:
        start = time.perf_counter()
        accepted = accepted_of(self.chain, context[self.seen :])
        self.seen = len(context)
        chain = [int(t) for t in self.lookup(np.asarray(context, dtype=np.intc))]
        self.chain = chain
        return chain, note(accepted, len(chain), time.perf_counter() - start)


def accepted_of(chain: list[int] | None, new: list[int]) -> int | None:
    """Chain tokens among the committed ``new`` (None: nothing was drafted; -1: ``new`` is not
    the accepted prefix plus one token)."""
    if chain is None:
        return None
    accepted = min(common_prefix(chain, new), len(new) - 1)
    return accepted if len(new) == accepted + 1 else -1


def note(accepted: int | None, chain: int, seconds: float) -> Note:
    """A step-log note (the vLLM proposer's keys)."""
    return {"a": accepted, "ar": 0, "p": chain, "c": chain, "t": round(seconds, 6), "k": 0,
            "hr": 0}  # fmt: skip


class DraftHook:
    """The ``draft_model`` of a ``llama_cpp.Llama``: a chain per call, a note per call.

    :meth:`start` before each generation, :meth:`finish` after it (the last step's accepted
    tokens are only seen there: the generation stopped before another call).
    """

    def __init__(self, proposer: ChainProposer) -> None:
        self.proposer = proposer
        self.llm: Any = None  # the Llama whose logits give top-k (bound after it is built)
        self.notes: list[Note] = []
        self.prompt_len, self.last_len, self.last_chain = 0, 0, 0
        self.chain: list[int] | None = None

    def start(self, prompt_len: int) -> None:
        self.proposer.start(prompt_len)
        self.notes, self.chain = [], None
        self.prompt_len, self.last_len, self.last_chain = prompt_len, prompt_len, 0

    def __call__(self, input_ids: np.ndarray, /, **_: Any) -> np.ndarray:
        context = [int(t) for t in input_ids]
        chain, entry = self.proposer.propose(context, self.verified_topk())
        room = self.room(len(context))
        if len(chain) > room:  # llama-cpp-python would cut it too, but after this note
            chain = chain[:room]
            entry["c"] = len(chain)
        self.notes.append(entry)
        self.last_len, self.last_chain, self.chain = len(context), len(chain), chain
        return np.asarray(chain, dtype=np.intc)

    def room(self, context: int) -> int:
        """Draft tokens that still fit the context: llama-cpp-python evaluates the root (the
        context's last token) and the chain at positions ``context - 1`` on."""
        if self.llm is None:
            return 1 << 30
        return max(int(self.llm.n_ctx()) - context, 0)

    def verified_topk(self) -> torch.Tensor | None:
        """Top-k of the rows the last step verified: the root and each chain token (first call:
        the prompt's last row), from llama.cpp's logits of every position."""
        k = int(getattr(self.proposer, "topk", 0))
        if not k or self.llm is None:
            return None
        first = self.last_len - 1
        rows = np.asarray(self.llm.scores[first : first + self.last_chain + 1], dtype=np.float32)
        return top_k_rows(rows, min(k, rows.shape[1]))

    def finish(self, generated: list[int]) -> list[Note]:
        """This generation's notes, with the last step's accepted count from ``generated``."""
        new = generated[self.last_len - self.prompt_len :]
        if self.chain is not None and new:
            accepted = min(common_prefix(self.chain, new), len(new) - 1)
            self.notes.append(note(accepted, 0, 0.0))
        return self.notes
