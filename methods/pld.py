"""Prompt Lookup Decoding (PLD): copy the continuation of an earlier occurrence of the suffix.

Paper/code: apoorvumang/prompt-lookup-decoding (``find_candidate_pred_tokens``), vendored by
Spec-Bench as ``model/pld``. Behaviour followed: for n = ``max_ngram_size`` down to 1, match the
last n tokens against every earlier window; the draft is the chain of up to
``num_pred_tokens`` tokens that followed the match. Deviations, both configurable:

* ``match="earliest"`` (reference) or ``"latest"`` (most recent occurrence, often better on
  code and multi-turn text);
* ``require_full``: the reference skips matches without a full ``num_pred_tokens``
  continuation; transformers' ``prompt_lookup_num_tokens`` accepts partial ones (default here,
  since a short copy near the end is still a useful draft).

Every node's ``Draft.score`` is the length n of the matched suffix (the confidence scheduler's
feature). The reference's dummy token on a miss is not reproduced: no match means an empty
draft, i.e. a plain autoregressive step, which is never slower.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
import torch

from racer_bench.config.schema import PositiveInt
from racer_bench.engine.drafter import DrafterNeeds
from racer_bench.engine.structs import Draft, DraftContext, Feedback, Source


def find_match(
    tokens: np.ndarray,
    max_ngram_size: int,
    num_pred_tokens: int,
    match: str = "earliest",
    require_full: bool = False,
    min_ngram_size: int = 1,
) -> tuple[list[int], int]:
    """(continuation, n) of the longest suffix n-gram that occurred before (([], 0) if none).

    Args:
        tokens: int array[L], the whole context (prompt + generated, root last).
        max_ngram_size: longest suffix tried first.
        num_pred_tokens: maximum continuation length.
        match: ``"earliest"`` or ``"latest"`` occurrence among the matches of one n.
        require_full: skip matches whose continuation is shorter than ``num_pred_tokens``.
        min_ngram_size: shortest suffix tried (vLLM's ``prompt_lookup_min``; the reference: 1).
    """
    length = len(tokens)
    for n in range(min(max_ngram_size, length - 1), min_ngram_size - 1, -1):
        query = tokens[length - n :]
        windows = np.lib.stride_tricks.sliding_window_view(tokens[: length - 1], n)
        starts = np.flatnonzero((windows == query).all(axis=1))  # start < L - n: no self-match
        if match == "latest":
            starts = starts[::-1]
        for start in starts.tolist():
            begin = start + n
            end = min(begin + num_pred_tokens, length)
            if end <= begin or (require_full and end - begin < num_pred_tokens):
                continue
            return tokens[begin:end].tolist(), n
    return [], 0


class PLDDrafter:
    """Prompt lookup decoding as a chain drafter."""

    name: ClassVar[str] = "pld"
    version: ClassVar[str] = "1"
    needs = DrafterNeeds()

    def __init__(
        self,
        vocab_size: int,
        max_ngram_size: PositiveInt = 3,
        num_pred_tokens: PositiveInt = 10,
        match: Literal["earliest", "latest"] = "earliest",
        require_full: bool = False,
        min_ngram_size: PositiveInt = 1,
    ) -> None:
        if match not in ("earliest", "latest"):
            raise ValueError(f"method.match={match}: allowed values are earliest, latest")
        if min_ngram_size > max_ngram_size:
            raise ValueError(f"method.min_ngram_size={min_ngram_size}: allowed values are 1 to "
                             f"max_ngram_size ({max_ngram_size})")  # fmt: skip
        self.max_ngram_size = max_ngram_size
        self.min_ngram_size = min_ngram_size
        self.num_pred_tokens = num_pred_tokens
        self.match = match
        self.require_full = require_full
        self.capacity = num_pred_tokens
        self._tokens = np.zeros(0, dtype=np.int64)

    def reset(self, prompt_ids: list[int], prompt_topk: torch.Tensor | None) -> None:
        self._tokens = np.asarray(prompt_ids, dtype=np.int64)

    def propose(self, ctx: DraftContext) -> Draft:
        if len(self._tokens) != len(ctx.tokens):
            self._tokens = np.asarray(ctx.tokens, dtype=np.int64)
        n = min(self.num_pred_tokens, ctx.budget, ctx.max_depth)
        chain, matched = find_match(self._tokens, self.max_ngram_size, n, self.match,
                                    self.require_full, self.min_ngram_size)  # fmt: skip
        draft = Draft.chain(chain, Source.RETRIEVAL)
        draft.score = torch.full((len(chain),), float(matched))  # the matched suffix length
        draft.meta["retrieval_found"] = float(bool(chain))
        return draft

    def update(self, fb: Feedback) -> None:
        self._tokens = np.concatenate([self._tokens, np.asarray(fb.committed, dtype=np.int64)])
