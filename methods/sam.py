"""SAM-Decoding: drafts from suffix automata over the generated text and a static corpus.

Paper: Hu, Chen, Yang, Zhou, Li, Xue, "SAM Decoding: Speculative Decoding via Suffix
Automaton", ACL 2025 (arXiv 2411.10666). Reference code: hyx1999/SAM-Decoding and its SAM-only
port in Spec-Bench (``model/samd``, ``tree_method=None``, Spec-Bench's default), which this
module follows (reimplemented from the algorithm, :mod:`methods.common.suffix_automaton`):

* a **dynamic** automaton per request over prompt + generated text; each committed token first
  moves the match (the longest suffix of the text that occurred *before*), then is inserted;
* an optional **static** automaton over a corpus (``corpus_automaton``: a ``.npz`` built by
  ``scripts/build_sam_corpus.py`` with the target's tokenizer), only its match state moving;
* per step, with dynamic and static match lengths ``d`` and ``s``: if ``d >= s - len_bias``
  (ties to dynamic) the draft is the chain that followed the earliest earlier occurrence of the
  match, ``int(alpha * d)`` tokens; otherwise a tree of ``int(alpha * s)`` nodes grown best
  first from the static state by cumulative ``count(child) / count(state)``, at most
  ``static_topk`` children per state and nodes per depth. ``d = 0`` with no static match gives
  no draft (a plain autoregressive step).

Without ``corpus_automaton`` the method runs on the dynamic automaton alone, as in Spec-Bench's
runs; ``static_corpus`` says which (``"none"`` or the file) and the run's config records it.
The reference's ``n_predicts=40`` counts the start (root) token: ``capacity`` counts draft nodes
only, so the GPU default is 39. Deviations: no zero padding of short chains; corpus documents
are separated by an id no query contains, never drafted (the reference appends EOS and every
vocabulary id as a one-token document); the auxiliary drafters of ``samd/`` (Token Recycling,
EAGLE) are not part of this method (``method=recycling`` exists on its own). Every node is
``Source.RETRIEVAL``; ``Draft.score`` is the match length the draft came from.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from typing import Annotated, ClassVar

import torch
from annotated_types import Ge

from methods.common.datastore import check_vocab
from methods.common.suffix_automaton import FrozenAutomaton, Match, SuffixAutomaton
from racer_bench.config.schema import PositiveInt
from racer_bench.engine.drafter import DrafterNeeds
from racer_bench.engine.structs import Draft, DraftContext, Feedback, Source

log = logging.getLogger(__name__)


def static_tree(
    sam: FrozenAutomaton, state: int, budget: int, max_depth: int, topk: int, skip: int = -1
) -> tuple[list[int], list[int]]:
    """Best-first draft tree below ``state`` by cumulative occurrence ratio.

    Args:
        sam: the corpus automaton.
        state: the matched state (its class ends with the root token).
        budget: most nodes; max_depth: deepest node.
        topk: most children expanded per state and most nodes per depth.
        skip: a token never drafted (the corpus separator).

    Returns:
        (tokens, parents), parents first, ``-1`` = child of the root.
    """
    tokens: list[int] = []
    parents: list[int] = []
    per_depth: dict[int, int] = {}
    tie = itertools.count()
    # entries: (-cumulative probability, tie, token, state, parent index, depth)
    heap: list[tuple[float, int, int, int, int, int]] = []
    if max_depth >= 1:
        _push_children(sam, heap, tie, state, 1.0, -1, 1, topk, skip)
    while heap and len(tokens) < budget:
        neg, _, token, target, parent, depth = heapq.heappop(heap)
        if per_depth.get(depth, 0) >= topk:
            continue
        per_depth[depth] = per_depth.get(depth, 0) + 1
        tokens.append(token)
        parents.append(parent)
        if depth < max_depth:
            _push_children(sam, heap, tie, target, -neg, len(tokens) - 1, depth + 1, topk, skip)
    return tokens, parents


def _push_children(
    sam: FrozenAutomaton, heap: list, tie: itertools.count, state: int, prob: float,
    parent: int, depth: int, topk: int, skip: int,
) -> None:  # fmt: skip
    total = int(sam.count[state])
    if total <= 0:
        return
    moves = [(int(sam.count[t]), tok, t) for tok, t in sam.children(state) if tok != skip]
    for count, token, target in sorted(moves, reverse=True)[:topk]:
        heapq.heappush(heap, (-prob * count / total, next(tie), token, target, parent, depth))


class SamDrafter:
    """SAM-Decoding, SAM-only (see the module docstring)."""

    name: ClassVar[str] = "sam"
    version: ClassVar[str] = "1"
    needs = DrafterNeeds()
    persist_across_prompts = False  # the static automaton is read-only; its match restarts

    def __init__(
        self,
        vocab_size: int,
        capacity: PositiveInt = 39,
        alpha: Annotated[float, Ge(0)] = 4.0,
        corpus_automaton: str | None = None,
        len_bias: Annotated[int, Ge(0)] = 0,
        static_topk: PositiveInt = 8,
    ) -> None:
        self.capacity = capacity
        self.alpha = alpha
        self.len_bias = len_bias
        self.static_topk = static_topk
        # Loaded here, not in reset, so the cost never lands in a timed prefill.
        self.static: FrozenAutomaton | None = None
        self.static_corpus = "none"
        self._separator = -1
        if corpus_automaton is not None:
            self.static = FrozenAutomaton.load(corpus_automaton)
            built = int(self.static.meta.get("vocab_size", vocab_size))
            check_vocab(built, vocab_size, f"corpus automaton {corpus_automaton}")
            self.static_corpus = str(corpus_automaton)
            self._separator = int(self.static.meta.get("separator", -1))
        else:
            log.info("method=sam: no corpus_automaton, drafting from the dynamic automaton only")
        self.dynamic = SuffixAutomaton()
        self.dyn_match = Match()
        self.static_match = Match()

    def reset(self, prompt_ids: list[int], prompt_topk: torch.Tensor | None) -> None:
        self.dynamic = SuffixAutomaton()
        self.dyn_match = Match()
        self.static_match = Match()
        self._add(list(prompt_ids))

    def propose(self, ctx: DraftContext) -> Draft:
        if len(ctx.tokens) > len(self.dynamic.tokens):  # the first root comes only here
            self._add(ctx.tokens[len(self.dynamic.tokens) :])
        budget = min(self.capacity, ctx.budget)
        dyn, stat = self.dyn_match.length, self.static_match.length
        meta = {"retrieval_found": 0.0, "dyn_match": float(dyn), "static_match": float(stat),
                "static_draft": 0.0}  # fmt: skip
        if budget <= 0 or ctx.max_depth <= 0:
            return _finish(Draft.empty(), meta, 0)
        if self.static is None or dyn >= stat - self.len_bias:
            n = min(budget, ctx.max_depth, int(dyn * self.alpha))
            chain = self.dynamic.continuation(self.dyn_match.state, n) if dyn > 0 else []
            return _finish(Draft.chain(chain, Source.RETRIEVAL), meta, dyn)
        n = min(budget, int(stat * self.alpha))
        tokens, parents = static_tree(self.static, self.static_match.state, n, ctx.max_depth,
                                      self.static_topk, self._separator)  # fmt: skip
        draft = Draft(
            tokens=torch.tensor(tokens, dtype=torch.long),
            parents=torch.tensor(parents, dtype=torch.long),
            source=torch.full((len(tokens),), int(Source.RETRIEVAL), dtype=torch.int32),
        )
        meta["static_draft"] = 1.0
        return _finish(draft, meta, stat)

    def update(self, fb: Feedback) -> None:
        self._add(list(fb.committed))

    def _add(self, tokens: list[int]) -> None:
        """Move both matches by each token, then insert it into the dynamic automaton."""
        for token in tokens:
            self.dyn_match.advance(self.dynamic, token)
            self.dynamic.append(token)
            self.dyn_match.normalize(self.dynamic)
            if self.static is not None:
                self.static_match.advance(self.static, token)


def _finish(draft: Draft, meta: dict[str, float], match: int) -> Draft:
    meta["retrieval_found"] = float(len(draft) > 0)
    draft.meta = meta
    draft.score = torch.full((len(draft),), float(match))
    return draft
