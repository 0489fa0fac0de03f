"""SuffixDecoding: draft trees from suffix trees over the request and earlier responses.

Paper: Oliaro, Jia, Campos, Qiao, "SuffixDecoding: Extreme Speculative Decoding for Emerging AI
Applications", NeurIPS 2025 (arXiv 2411.04975). Reference code: snowflakedb/ArcticInference
(``arctic_inference/suffix_decoding``; C++ ``SuffixTree``, Python ``SuffixDecodingCache``),
also the proposer behind vLLM's ``method="suffix"``. Behaviour followed (reimplemented from the
algorithm, :mod:`methods.common.suffix_tree`):

* a **local** suffix tree per request over prompt + response so far, and one **global** suffix
  tree over the responses (never the prompts) of earlier requests, the current response
  included while it is decoded; both are depth-capped at ``max_tree_depth`` and updated per
  committed token, before the next draft (so, as in the reference, the current suffix is itself
  stored and a pattern seen k times before, always continued the same way, drafts with
  probability k / (k + 1));
* per step each tree drafts from every matched suffix of the last ``max_tree_depth`` tokens
  (``max_spec_factor * match_len + max_spec_offset`` nodes, capped at ``max_spec_tokens``,
  cumulative count-ratio probability >= ``min_token_prob``), keeping its best-scoring draft
  (score = sum of node probabilities); the local draft wins ties with the global one, and the
  two are never merged;
* ``max_cached_requests``: responses kept in the global tree, evicted first-in first-out
  (``-1`` unlimited, ``0`` no global tree); the request being decoded is never evicted.

Nodes are ``Source.RETRIEVAL``; ``Draft.score`` is each node's count ratio
(P(token | parent's path) under the trees' counts), so ``score_is_probability`` is set.
``use_tree_spec=true`` (default here, the paper and the reference simulator) grows trees best
first; ``false`` is the reference's path mode (vLLM's default): one chain along the most
frequent child. ``persist_across_prompts`` (default true, the reference) keeps the global tree
across prompts, so results depend on prompt order; false empties it at every ``reset``.
"""

from __future__ import annotations

from collections import deque
from typing import Annotated, ClassVar

import torch
from annotated_types import Ge, Interval

from methods.common.suffix_tree import SpecDraft, SuffixTree
from racer_bench.config.schema import PositiveInt
from racer_bench.engine.drafter import DrafterNeeds
from racer_bench.engine.structs import Draft, DraftContext, Feedback, Source


class SuffixCache:
    """The local tree of the current request and the global tree of cached responses."""

    def __init__(self, max_depth: int, max_cached_requests: int) -> None:
        self.max_depth = max_depth
        self.max_cached_requests = max_cached_requests
        self.global_tree = SuffixTree(max_depth) if max_cached_requests != 0 else None
        self.local = SuffixTree(max_depth)
        self.cached: deque[int] = deque()  # response ids in the global tree, oldest first
        self.request = -1

    def start_request(self, prompt_ids: list[int]) -> None:
        """New local tree from the prompt; a new response id, evicting the oldest if full."""
        self.local = SuffixTree(self.max_depth)
        self.local.extend(0, prompt_ids)
        self.request += 1
        if self.global_tree is None:
            return
        self.cached.append(self.request)
        while 0 < self.max_cached_requests < len(self.cached):
            oldest = self.cached.popleft()
            if oldest in self.global_tree.seqs:  # a response with no token was never stored
                self.global_tree.remove(oldest)

    def add_response(self, tokens: list[int]) -> None:
        """Append committed response tokens to the local tree and the cached response."""
        self.local.extend(0, tokens)
        if self.global_tree is not None and self.cached and self.cached[-1] == self.request:
            self.global_tree.extend(self.request, tokens)


class SuffixDrafter:
    """SuffixDecoding (see the module docstring)."""

    name: ClassVar[str] = "suffix"
    version: ClassVar[str] = "1"
    needs = DrafterNeeds()

    def __init__(
        self,
        vocab_size: int,
        max_spec_tokens: PositiveInt = 64,
        max_tree_depth: PositiveInt = 64,
        max_spec_factor: Annotated[float, Ge(0)] = 1.0,
        max_spec_offset: Annotated[float, Interval(ge=-1024, le=1024)] = 0.0,
        min_token_prob: Annotated[float, Interval(ge=0, le=1)] = 0.1,
        max_cached_requests: Annotated[int, Ge(-1)] = 100000,
        use_tree_spec: bool = True,
        persist_across_prompts: bool = True,
    ) -> None:
        self.capacity = max_spec_tokens
        self.max_tree_depth = max_tree_depth
        self.max_spec_factor = max_spec_factor
        self.max_spec_offset = max_spec_offset
        self.min_token_prob = min_token_prob
        self.max_cached_requests = max_cached_requests
        self.use_tree_spec = use_tree_spec
        self.persist_across_prompts = persist_across_prompts  # recorded in the run manifest
        self.cache = SuffixCache(max_tree_depth, max_cached_requests)
        self._seen = 0  # committed tokens already in the trees

    def reset(self, prompt_ids: list[int], prompt_topk: torch.Tensor | None) -> None:
        if not self.persist_across_prompts:
            self.cache = SuffixCache(self.max_tree_depth, self.max_cached_requests)
        self.cache.start_request(list(prompt_ids))
        self._seen = len(prompt_ids)

    def propose(self, ctx: DraftContext) -> Draft:
        self._sync(ctx.tokens)  # the first root never comes through update()
        budget = min(self.capacity, ctx.budget)
        meta = {"retrieval_found": 0.0, "match_len": 0.0, "global_draft": 0.0}
        if budget <= 0 or ctx.max_depth <= 0:
            return _with_meta(Draft.empty(), meta)
        best = self._speculate(self.cache.local, ctx, budget)
        if self.cache.global_tree is not None:
            other = self._speculate(self.cache.global_tree, ctx, budget)
            if other.score > best.score:  # ties go to the local tree
                best, meta["global_draft"] = other, 1.0
        meta.update(retrieval_found=float(len(best) > 0), match_len=float(best.match_len))
        return _with_meta(to_draft(best), meta)

    def update(self, fb: Feedback) -> None:
        self.cache.add_response(list(fb.committed))
        self._seen += len(fb.committed)

    def _sync(self, tokens: list[int]) -> None:
        if len(tokens) > self._seen:
            self.cache.add_response(tokens[self._seen :])
            self._seen = len(tokens)

    def _speculate(self, tree: SuffixTree, ctx: DraftContext, budget: int) -> SpecDraft:
        return tree.speculate(
            ctx.tokens[-self.max_tree_depth :],
            budget,
            self.max_spec_factor,
            self.max_spec_offset,
            self.min_token_prob,
            ctx.max_depth,
            self.use_tree_spec,
        )


def to_draft(spec: SpecDraft) -> Draft:
    """A :class:`Draft` of ``spec``, each node scored by its count ratio to its parent."""
    n = len(spec)
    parent_probs = [spec.probs[q] if q >= 0 else 1.0 for q in spec.parents]
    cond = [p / up for p, up in zip(spec.probs, parent_probs, strict=True)]
    return Draft(
        tokens=torch.tensor(spec.tokens, dtype=torch.long),
        parents=torch.tensor(spec.parents, dtype=torch.long),
        source=torch.full((n,), int(Source.RETRIEVAL), dtype=torch.int32),
        score=torch.tensor(cond, dtype=torch.float32),
        score_is_probability=True,
    )


def _with_meta(draft: Draft, meta: dict[str, float]) -> Draft:
    draft.meta = meta
    return draft
