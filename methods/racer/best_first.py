"""RACER's draft tree grown best-first by estimated acceptance (``selection=best_first``).

Every candidate node ``v`` gets an estimate ``p(v)`` of P(v accepted | its parent accepted):

* retrieval (a child ``c`` of automaton node ``u`` below a border): the smoothed share of the
  windows through ``u`` that continue with ``c``, ``freq(c) / (freq(u) + retrieval_alpha)``.
  Relative to the border this is the matched context's own continuation frequency, so a long
  match seen once outranks the many spread continuations of a short match seen often (the
  paper's selection compares raw counts across borders, which favours the short matches).
* logits (entry ``r`` of the token's TokenBin row at depth ``d``): the acceptance rate of rank
  ``r`` at that depth in this generation so far (:class:`RankRates`, a Beta prior of a few
  pseudo-observations around :data:`RANK_PRIOR`).

A node's path score is the product of ``p`` from the root, which never grows along a path, so
adding the ``budget`` best-scoring nodes one at a time (a heap over the frontier) yields a
prefix-closed tree: the best expected number of accepted tokens for the budget, as far as the
estimates go. A token proposed by both sources is one node, labelled with the source that
scored it higher (it comes first), whose children come from both. A row's entries are offered
one at a time in decreasing ``p`` (the next sibling when one is taken), which adds the same
nodes as offering all of them at once with a smaller heap. A copied passage that reaches the
end of a stored window goes on from the longest suffix of the window that has continuations
(:meth:`methods.racer.automaton.Automaton.continuations`), so chains are not cut at ``ngram``.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import count

import numpy as np

from racer_bench.engine.structs import Draft, Source
from racer_bench.engine.tree import TrieBuilder, node_depths

# P(rank r accepted | parent accepted) in a logits-only tree, rounded from a replay of
# HumanEval/0-19 completions with SmolLM2-135M: a prior worth 4 observations per (depth, rank),
# soon outweighed by each generation's own counts (MAT barely moves for strengths 1 to 64).
RANK_PRIOR = (0.45, 0.08, 0.05, 0.04, 0.02, 0.015, 0.015, 0.01)
DEPTH_BUCKETS = 3  # depth 1, 2, >= 3


def retrieval_p(child_freq: int, parent_freq: int, alpha: float) -> float:
    """Estimated P(child accepted | parent accepted) of a retrieval node from window counts."""
    return child_freq / (parent_freq + alpha)


class RankRates:
    """Online acceptance rate of logits-tree nodes per (depth bucket, rank), Beta-smoothed."""

    def __init__(self, width: int, prior_strength: float = 4.0) -> None:
        prior = np.array([RANK_PRIOR[min(r, len(RANK_PRIOR) - 1)] for r in range(width)])
        self.prior_hits = np.tile(prior * prior_strength, (DEPTH_BUCKETS, 1))
        self.prior_trials = prior_strength
        self.clear()

    def clear(self) -> None:
        self.hits = np.zeros_like(self.prior_hits)
        self.trials = np.zeros_like(self.prior_hits)
        self._refresh()

    def _refresh(self) -> None:
        self.table: list[list[float]] = (
            (self.hits + self.prior_hits) / (self.trials + self.prior_trials)
        ).tolist()

    def rate(self, rank: int, depth: int) -> float:
        """Estimated P(accepted | parent accepted) of a rank-``rank`` node at ``depth`` >= 1."""
        return self.table[min(depth, DEPTH_BUCKETS) - 1][rank]

    def observe(self, draft: Draft, accepted: Sequence[int]) -> None:
        """Count every logits node whose parent was accepted (or is the root)."""
        if draft.source is None or draft.rank is None or len(draft) == 0:
            return
        parents = draft.parents.tolist()
        sources, ranks = draft.source.tolist(), draft.rank.tolist()
        depths = node_depths(parents)
        live = {-1, *accepted}
        hits = set(accepted)
        width = self.hits.shape[1]
        for i, parent in enumerate(parents):
            if parent in live and sources[i] == Source.LOGITS and 0 <= ranks[i] < width:
                bucket = min(depths[i], DEPTH_BUCKETS) - 1
                self.trials[bucket, ranks[i]] += 1
                self.hits[bucket, ranks[i]] += i in hits
        self._refresh()


RetrievalChildren = Callable[[int], tuple[int, dict[int, int]]]  # automaton node -> (source, kids)
LogitRows = Callable[[int], list[int] | None]  # token -> remembered top-k ids after it


@dataclass(slots=True)
class _Frontier:
    """The candidate nodes of :func:`grow_best_first` in a heap by path score (the settings are
    its arguments; ``table`` is :attr:`RankRates.table`, empty without a logits tree).

    An item is ``(-path score, tie, parent index, token, rank, automaton node, depth, p,
    siblings, pos, parent score)``: the automaton node is -1 for a logits candidate, whose row
    entries not offered yet are ``siblings[pos + 1:]`` (None for a retrieval candidate).
    """

    retrieval_children: RetrievalChildren | None
    freq: Sequence[int]
    rows: LogitRows | None
    table: list[list[float]]
    max_depth: int
    max_breadth: int
    retrieval_alpha: float
    skip_self: bool
    heap: list[tuple] = field(default_factory=list)
    # equal scores: first pushed first (shallower, retrieval before logits)
    tie: Iterator[int] = field(default_factory=count)

    def push_retrieval(self, index: int, node: int, score: float, depth: int) -> None:
        """Offer every automaton child of ``node`` below the trie node ``index``."""
        if self.retrieval_children is None or depth >= self.max_depth:
            return
        source_node, kids = self.retrieval_children(node)
        freq, alpha, heap, tie = self.freq, self.retrieval_alpha, self.heap, self.tie
        parent_freq = freq[source_node]
        for token, child in kids.items():
            p = retrieval_p(freq[child], parent_freq, alpha)
            item = (-score * p, next(tie), index, token, -1, child, depth + 1, p, None, 0, 0.0)
            heapq.heappush(heap, item)

    def push_logits(self, index: int, token: int, score: float, depth: int) -> None:
        """Offer the node's best row entry; the next one is offered when it is taken."""
        if self.rows is None or depth >= self.max_depth:
            return
        row = self.rows(token)
        if not row:
            return
        rate = self.table[min(depth + 1, DEPTH_BUCKETS) - 1]
        skip_self = self.skip_self
        ranks = [r for r, t in enumerate(row) if not (skip_self and t == token)][: self.max_breadth]
        ranks.sort(key=lambda r: -rate[r])
        siblings = [(r, row[r], rate[r]) for r in ranks]
        self.push_sibling(index, siblings, 0, score, depth + 1)

    def push_sibling(self, index: int, siblings: list, pos: int, score: float, depth: int) -> None:
        """Offer row entry ``siblings[pos]`` (rank, token, p) of a node of path score ``score``."""
        if pos < len(siblings):
            rank, token, p = siblings[pos]
            item = (-score * p, next(self.tie), index, token, rank, -1, depth, p, siblings, pos,
                    score)  # fmt: skip
            heapq.heappush(self.heap, item)


def grow_best_first(
    builder: TrieBuilder,
    root: int,
    borders: Sequence[int],
    retrieval_children: RetrievalChildren | None,
    freq: Sequence[int],
    rows: LogitRows | None,
    rates: RankRates | None,
    max_depth: int,
    max_breadth: int,
    retrieval_alpha: float = 0.1,
    skip_self: bool = False,
) -> list[float]:
    """Fill ``builder`` with the best-scoring candidates; returns ``p`` of every node added.

    Args:
        builder: the (empty) candidate trie below the root.
        root: the root token.
        borders: automaton nodes whose path ends with the root token (may be empty).
        retrieval_children: automaton node -> {token: child node}; None = no retrieval.
        freq: automaton node -> window count.
        rows: token -> remembered top-k ids after it, or None; None = no logits tree.
        rates: logits acceptance estimates (required with ``rows``).
        max_depth: deepest node depth allowed (root = 0).
        max_breadth: how many entries of a row become candidates.
        retrieval_alpha: smoothing added to the parent's count in the retrieval estimate.
        skip_self: drop row entries equal to the node's own token (last-logit rows).

    Returns:
        float list[len(builder)]: each node's ``p`` (its estimate when it was added).
    """
    table = rates.table if rates is not None else []
    frontier = _Frontier(retrieval_children, freq, rows, table, max_depth, max_breadth,
                         retrieval_alpha, skip_self)  # fmt: skip
    for border in borders:
        frontier.push_retrieval(-1, border, 1.0, 0)
    frontier.push_logits(-1, root, 1.0, 0)
    heap = frontier.heap
    scores: list[float] = []
    while heap and not builder.full:
        neg_score, _, parent, token, rank, node, depth, p, siblings, pos, parent_score = (
            heapq.heappop(heap)
        )
        if siblings is not None:
            frontier.push_sibling(parent, siblings, pos + 1, parent_score, depth)
        index = builder.child(parent, token)
        if index is None:
            source = Source.RETRIEVAL if node >= 0 else Source.LOGITS
            index = builder.add(parent, token, source, rank)
            scores.append(p)
            frontier.push_logits(index, token, -neg_score, depth)
        if node >= 0:
            frontier.push_retrieval(index, node, -neg_score, depth)
    return scores
