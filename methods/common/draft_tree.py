"""EAGLE-2-style dynamic draft trees over a draft vocabulary, and their :class:`Draft`.

:func:`grow_scored_tree` expands the ``topk`` best nodes per depth, then keeps the ``budget``
best nodes by cumulative log-score; :func:`tree_draft` maps the kept draft-vocabulary tokens
to target ids (``draft_ids``: draft index -> target id).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from racer_bench.engine.structs import Draft, Source

Expand = Callable[[list[int], int, list[int], list[int]], torch.Tensor]


def grow_tree(
    root_logp: torch.Tensor, expand: Expand, depth: int, topk: int, budget: int
) -> tuple[list[int], list[int]]:
    """EAGLE-2-style dynamic tree over a draft vocabulary (see :func:`grow_scored_tree`).

    Returns:
        (draft-vocabulary tokens, parents) of the kept nodes, topological.
    """
    tokens, parents, _ = grow_scored_tree(root_logp, expand, depth, topk, budget)
    return tokens, parents


def grow_scored_tree(
    root_logp: torch.Tensor, expand: Expand, depth: int, topk: int, budget: int
) -> tuple[list[int], list[int], list[float]]:
    """EAGLE-2-style dynamic tree: expand the ``topk`` best nodes per depth, keep ``budget``.

    Args:
        root_logp: FloatTensor[Vd] log-scores of the depth-1 tokens (log-probabilities for
            EAGLE/Medusa, log predicted acceptance for DSpark).
        expand: ``expand(frontier, d, tokens, parents)`` -> FloatTensor[F, Vd] log-scores of the
            children (depth ``d``) of the frontier nodes; ``tokens``/``parents`` describe
            every node so far.
        depth: maximum node depth; topk: children per frontier node and frontier width;
        budget: nodes kept.

    Returns:
        (draft-vocabulary tokens, parents, each node's own log-score) of the kept nodes, in
        topological order; a node's path score is the sum of its ancestors' and its own.
    """
    if depth < 1 or budget < 1:
        return [], [], []
    lp, ix = root_logp.topk(min(topk, root_logp.numel()))
    tokens, parents, scores = ix.tolist(), [-1] * len(ix), lp.tolist()
    local = list(scores)
    frontier = list(range(len(tokens)))
    for d in range(2, depth + 1):
        logp = expand(frontier, d, tokens, parents)
        lp, ix = logp.topk(min(topk, logp.shape[-1]), dim=-1)  # [F, k]
        cand = torch.tensor([scores[i] for i in frontier], dtype=lp.dtype)[:, None] + lp
        first = len(tokens)
        for row, node in enumerate(frontier):
            tokens += ix[row].tolist()
            parents += [node] * ix.shape[1]
        scores += cand.flatten().tolist()
        local += lp.flatten().tolist()
        best = cand.flatten().topk(min(topk, cand.numel())).indices
        frontier = [first + int(b) for b in best]
    kept = _best_indices(parents, scores, budget)
    return *_reindex(tokens, parents, kept), [local[i] for i in kept]


def _reindex(tokens: list[int], parents: list[int], kept: list[int]) -> tuple[list[int], list[int]]:
    """(tokens, parents) of the ``kept`` nodes (ascending, closed under parents), re-indexed."""
    index = {old: new for new, old in enumerate(kept)}
    return [tokens[i] for i in kept], [index[parents[i]] if parents[i] >= 0 else -1 for i in kept]


def _best_indices(parents: list[int], scores: list[float], budget: int) -> list[int]:
    """Indices (ascending) of the ``budget`` best-scoring nodes whose ancestors are all kept."""
    kept: set[int] = set()
    for i in sorted(range(len(parents)), key=lambda i: (-scores[i], i)):
        if len(kept) >= budget:
            break
        if parents[i] < 0 or parents[i] in kept:
            kept.add(i)
    return sorted(kept)


def tree_draft(
    tokens: list[int],
    parents: list[int],
    draft_ids: torch.Tensor,
    probs: list[float] | None = None,
) -> Draft:
    """A :class:`Draft` of MODEL nodes from draft-vocabulary tokens (``probs``: Draft.score)."""
    ids = draft_ids[torch.tensor(tokens, dtype=torch.long)] if tokens else torch.zeros(0)
    return Draft(
        tokens=ids.long(),
        parents=torch.tensor(parents, dtype=torch.long),
        source=torch.full((len(tokens),), int(Source.MODEL), dtype=torch.int32),
        score=None if probs is None else torch.tensor(probs, dtype=torch.float32),
    )
