"""Pure draft-tree utilities over parent arrays (no model needed).

A tree is a parent array ``parents[N]`` (``-1`` = child of the root, ``parents[i] < i``). The
root itself is implicit: it is position 0 of the verification forward and node ``i`` is
position ``i + 1``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from racer_bench.engine.structs import Draft, Source


def node_depths(parents: Sequence[int]) -> list[int]:
    """Depth of every node (children of the root have depth 1)."""
    depths: list[int] = []
    for p in parents:
        depths.append(1 if p < 0 else depths[p] + 1)
    return depths


def is_chain(parents: Sequence[int]) -> bool:
    """True when node ``i``'s parent is ``i - 1`` for every node (a causal-mask forward)."""
    return all(p == i - 1 for i, p in enumerate(parents))


def path_to(node: int, parents: Sequence[int]) -> list[int]:
    """Node indices from the root's child down to ``node`` (empty for ``node = -1``)."""
    path: list[int] = []
    while node >= 0:
        path.append(node)
        node = parents[node]
    return path[::-1]


def ancestor_mask(parents: Sequence[int]) -> torch.Tensor:
    """BoolTensor[N+1, N+1]: row ``i`` attends to column ``j`` iff j is i or an ancestor of i.

    Index 0 is the root; node ``k`` is index ``k + 1``. Vectorised over nodes: one round per
    tree level, in which every row climbs one parent (numpy: a few microseconds per round).
    """
    up = np.concatenate([[0], np.asarray(parents, dtype=np.int64) + 1])  # root: its own parent
    rows = np.arange(up.size)
    mask = np.zeros((up.size, up.size), dtype=bool)
    current = rows
    mask[rows, current] = True
    while current.any():
        current = up[current]
        mask[rows, current] = True
    return torch.from_numpy(mask)


def check_draft(draft: Draft, budget: int | None = None) -> None:
    """Raise ValueError when a draft breaks the tree contract (shapes, topology, budget)."""
    n = len(draft)
    if draft.parents.numel() != n:
        raise ValueError(f"draft has {n} tokens but {draft.parents.numel()} parents")
    parents = draft.parents.tolist()
    for i, p in enumerate(parents):
        if not -1 <= p < i:
            raise ValueError(f"parents[{i}]={p} is not topological (need -1 <= p < {i})")
    if budget is not None and n > budget:
        raise ValueError(f"draft has {n} nodes, budget is {budget}")
    if draft.source is not None and draft.source.numel() != n:
        raise ValueError("draft.source must have one entry per node")


def select_nodes(draft: Draft, keep: Sequence[int]) -> Draft:
    """Sub-draft of the nodes ``keep`` (ascending, closed under parents), re-indexed."""
    index = {old: new for new, old in enumerate(keep)}
    parents = draft.parents.tolist()
    new_parents = [index[parents[k]] if parents[k] >= 0 else -1 for k in keep]
    sel = torch.tensor(list(keep), dtype=torch.long)
    return Draft(
        tokens=draft.tokens[sel],
        parents=torch.tensor(new_parents, dtype=torch.long),
        source=None if draft.source is None else draft.source[sel],
        q=None if draft.q is None else draft.q[sel],
        meta=draft.meta,
        aux=draft.aux,
        rank=None if draft.rank is None else draft.rank[sel],
        score=None if draft.score is None else draft.score[sel],
        score_is_probability=draft.score_is_probability,
    )


def prune(draft: Draft, budget: int, max_depth: int) -> Draft:
    """Keep the first ``budget`` nodes of depth <= ``max_depth`` (the result is prefix-closed).

    Because the order is topological, a node's parent always precedes it, so taking nodes in
    order and skipping any whose parent was dropped keeps every kept path intact.
    """
    parents = draft.parents.tolist()
    depths = node_depths(parents)
    if len(parents) <= budget and (not depths or max(depths) <= max_depth):
        return draft
    kept: set[int] = set()
    keep: list[int] = []
    for i, p in enumerate(parents):
        if len(keep) >= budget:
            break
        if depths[i] <= max_depth and (p < 0 or p in kept):
            kept.add(i)
            keep.append(i)
    return select_nodes(draft, keep)


SCORE_MERGES = ("max", "sum")


class TrieBuilder:
    """Merges candidate token paths below the root into one deduplicated draft tree.

    Paths are inserted in priority order; insertion stops adding nodes once ``capacity`` nodes
    exist, so earlier (higher-priority) candidates always survive.

    Every node may carry a score (``Draft.score``; NaN = none). When a path reaches a node that
    already exists, the scores are merged: ``max`` keeps the larger (e.g. the longest match
    through the node), ``sum`` adds them (e.g. how many candidates pass through it); NaN counts
    as absent.
    """

    def __init__(self, capacity: int, score_merge: str = "max") -> None:
        if score_merge not in SCORE_MERGES:
            raise ValueError(f"score_merge={score_merge}: allowed are {', '.join(SCORE_MERGES)}")
        self.capacity = capacity
        self.score_merge = score_merge
        self.tokens: list[int] = []
        self.parents: list[int] = []
        self.sources: list[int] = []
        self.ranks: list[int] = []
        self.scores: list[float] = []
        self._children: dict[tuple[int, int], int] = {}

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def full(self) -> bool:
        return len(self.tokens) >= self.capacity

    def child(self, parent: int, token: int) -> int | None:
        """Index of ``parent``'s child carrying ``token`` (``parent=-1`` = root), if any."""
        return self._children.get((parent, token))

    def add(
        self,
        parent: int,
        token: int,
        source: int = Source.OTHER,
        rank: int = -1,
        score: float = math.nan,
    ) -> int:
        """Add (or find) one node; returns its index, or -1 when the tree is full."""
        found = self._children.get((parent, token))
        if found is not None:
            self._merge_score(found, score)
            return found
        if self.full:
            return -1
        idx = len(self.tokens)
        self._children[(parent, token)] = idx
        self.tokens.append(token)
        self.parents.append(parent)
        self.sources.append(int(source))
        self.ranks.append(rank)
        self.scores.append(float(score))
        return idx

    def _merge_score(self, idx: int, score: float) -> None:
        old = self.scores[idx]
        if math.isnan(score):
            return
        if math.isnan(old):
            self.scores[idx] = float(score)
        elif self.score_merge == "max":
            self.scores[idx] = max(old, float(score))
        else:
            self.scores[idx] = old + float(score)

    def add_path(
        self,
        path: Sequence[int],
        source: int = Source.OTHER,
        parent: int = -1,
        score: float = math.nan,
    ) -> int:
        """Insert a path below ``parent``, each node scored ``score``; returns how many are new."""
        before = len(self.tokens)
        for token in path:
            parent = self.add(parent, int(token), source, score=score)
            if parent < 0:
                break
        return len(self.tokens) - before

    def build(self, meta: dict[str, float] | None = None) -> Draft:
        scored = any(not math.isnan(x) for x in self.scores)
        return Draft(
            tokens=torch.tensor(self.tokens, dtype=torch.long),
            parents=torch.tensor(self.parents, dtype=torch.long),
            source=torch.tensor(self.sources, dtype=torch.int32),
            meta=meta or {},
            rank=torch.tensor(self.ranks, dtype=torch.long),
            score=torch.tensor(self.scores, dtype=torch.float32) if scored else None,
        )
