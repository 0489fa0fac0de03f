"""Project a draft tree onto one chain: vLLM 0.32 verifies chains, not trees.

The chain kept is the root-to-leaf path with the most expected accepted tokens, where a node's
probability of being accepted given its parent is the drafter's own estimate
(``Draft.score`` with ``score_is_probability``) and 1 for drafters without one. With
probabilities, the expected accepted length of a path is the sum of its prefix products; without
them it is the path's length, so the deepest path wins and ties go to the child listed first
(drafters list their preferred child first).
"""

from __future__ import annotations

import math
from dataclasses import replace

from racer_bench.engine.structs import Draft
from racer_bench.engine.tree import node_depths, select_nodes


def node_probabilities(draft: Draft) -> list[float]:
    """P(node accepted | parent accepted) per node: the drafter's estimate, else 1."""
    n = len(draft)
    if draft.score is None or not draft.score_is_probability:
        return [1.0] * n
    out = []
    for s in draft.score.tolist():
        out.append(min(max(s, 0.0), 1.0) if math.isfinite(s) else 1.0)
    return out


def best_path(draft: Draft, max_len: int) -> list[int]:
    """Node indices (root's child first) of the path with the most expected accepted tokens.

    Only nodes at depth ``<= max_len`` are considered, so the path has at most ``max_len`` nodes.
    """
    parents = draft.parents.tolist()
    depths = node_depths(parents)
    probs = node_probabilities(draft)
    reach = [0.0] * len(parents)  # P(every node from the root's child down to i accepted)
    for i, p in enumerate(parents):
        reach[i] = probs[i] * (reach[p] if p >= 0 else 1.0)
    value = [0.0] * len(parents)  # expected accepted tokens of the best path through i
    best_child: dict[int, int] = {}  # parent (-1 = root) -> its best child
    for i in range(len(parents) - 1, -1, -1):
        if depths[i] > max_len:
            continue
        value[i] += reach[i]
        parent = parents[i]
        current = best_child.get(parent)
        if current is None or value[i] >= value[current]:  # >=: the earlier child wins ties
            best_child[parent] = i
        if parent >= 0:
            value[parent] = max(value[parent], value[i])
    path: list[int] = []
    node = best_child.get(-1)
    while node is not None:
        path.append(node)
        node = best_child.get(node)
    return path


def to_chain(draft: Draft, max_len: int) -> Draft:
    """The draft cut down to :func:`best_path` (sources, scores and ranks kept per node)."""
    if len(draft) == 0:
        return draft
    return replace(select_nodes(draft, best_path(draft, max_len)), aux=None)
