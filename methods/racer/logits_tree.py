"""RACER's logits tree: remembered target top-k rows expanded with breadth halving.

:class:`TokenBin` is a ``[vocab, width]`` table of token ids: row ``t`` holds the target's
top-``width`` ids recorded at the most recent occurrence of ``t`` (last write wins). Only ids
are stored, never logits. Unlike the reference (rows zero-filled, so an unseen row proposes
token 0 ``width`` times), unseen rows are marked and expand nothing.

:func:`grow_logits_tree` expands rows breadth-first from the root into a shared
:class:`racer_bench.engine.tree.TrieBuilder` (reference ``TokenBin::retrieve``, RACER Eq. 3).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np

from racer_bench.engine.structs import Source
from racer_bench.engine.tree import TrieBuilder

HALVING = ("reference", "paper")


class TokenBin:
    """Per-token memory of the target's top-k ids (RACER's copy-logit table).

    Attributes:
        table: int64 array[vocab, width] of token ids.
        seen: bool array[vocab]; False rows have never been written.
    """

    def __init__(self, vocab_size: int, width: int) -> None:
        self.vocab_size = vocab_size
        self.width = width
        self.table = np.zeros((vocab_size, width), dtype=np.int64)
        self.seen = np.zeros(vocab_size, dtype=bool)

    def clear(self) -> None:
        self.table.fill(0)
        self.seen.fill(False)

    def update(self, tokens: np.ndarray, topk: np.ndarray) -> None:
        """Write ``topk[i]`` into row ``tokens[i]``; for repeated tokens the last one wins.

        Args:
            tokens: int array[n] row keys; ids outside ``[0, vocab)`` are ignored.
            topk: int array[n, >= width] top-k ids, best first (extra columns are dropped).
        """
        tokens = np.asarray(tokens, dtype=np.int64)
        if tokens.size == 0:
            return
        valid = (tokens >= 0) & (tokens < self.vocab_size)
        keys, rows = tokens[valid], np.asarray(topk)[valid, : self.width]
        # np.unique keeps the first index of each key: run it on the reversed keys.
        _, first = np.unique(keys[::-1], return_index=True)
        last = len(keys) - 1 - first
        self.table[keys[last]] = rows[last]
        self.seen[keys[last]] = True

    def row(self, token: int) -> list[int] | None:
        """The remembered top-k ids after ``token`` (best first), or None if never seen."""
        if not 0 <= token < self.vocab_size or not self.seen[token]:
            return None
        return self.table[token].tolist()


def child_breadth(breadth: int, ordinal: int, depth: int, halving: str = "reference") -> int:
    """Breadth of the ``ordinal``-th child (0-based) of a node of ``depth`` and ``breadth``.

    Halving per sibling rank plus one extra halving, except for the children of depth-1 nodes
    (``reference``: hkr04/RACER @fc494a3, methods.md) or of the root (``paper``: Eq. 3 and
    Fig. 9 of the paper). Never below 1, so the tree keeps deepening while budget lasts.
    """
    no_extra = 1 if halving == "reference" else 0
    return max(1, breadth >> (ordinal + (depth != no_extra)))


def grow_logits_tree(
    builder: TrieBuilder,
    root: int,
    rows: Callable[[int], list[int] | None],
    budget: int,
    max_depth: int,
    max_breadth: int,
    halving: str = "reference",
    skip_self: bool = False,
) -> int:
    """Breadth-first logits tree below the root, merged into ``builder``.

    A node of depth ``d`` and breadth ``b`` takes the first ``b`` ids of its row as children
    (child ``j`` gets :func:`child_breadth`), while ``budget`` new nodes remain. A child that
    already exists in ``builder`` (e.g. from retrieval) costs nothing and is expanded further.
    New nodes get ``Source.LOGITS`` and their rank (index in the row).

    Args:
        builder: the shared candidate trie; its root is the draft root (``parent = -1``).
        root: the root token (depth 0, breadth ``max_breadth``).
        rows: token -> remembered top-k ids after it (best first), or None.
        budget: the most new nodes to add.
        max_depth: the deepest node depth allowed (root = 0).
        skip_self: drop row entries equal to the node's own token (last-logit rows, whose top-1
            is the token itself); skipped entries still consume their rank.

    Returns:
        The number of nodes added.
    """
    added = 0
    queue: deque[tuple[int, int, int, int]] = deque([(-1, root, max_breadth, 0)])
    while queue and added < budget:
        index, token, breadth, depth = queue.popleft()
        row = rows(token) if depth < max_depth else None
        if not row:
            continue
        ordinal = 0
        for rank, child in enumerate(row):
            if ordinal >= breadth or added >= budget:
                break
            if skip_self and child == token:
                continue
            node = builder.child(index, child)
            if node is None:
                node = builder.add(index, child, Source.LOGITS, rank)
                if node < 0:  # the shared tree is full
                    return added
                added += 1
            queue.append((node, child, child_breadth(breadth, ordinal, depth, halving), depth + 1))
            ordinal += 1
    return added
