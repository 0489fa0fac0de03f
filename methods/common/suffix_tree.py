"""A depth-capped, path-compressed suffix tree over many token sequences, with counts.

The structure SuffixDecoding drafts from (Oliaro et al., NeurIPS 2025). Every sequence stored
in the tree contributes all its suffixes, each cut at ``max_depth`` tokens. A node's ``count``
is the number of stored suffixes that pass through it or end at it, i.e. the number of
occurrences of the node's string (strings longer than ``max_depth`` are not stored), so
``child.count / node.count`` is the empirical probability of the child's token after the
node's string.

Incremental: :meth:`SuffixTree.append` adds one token to a sequence in O(``max_depth``) (each
of the at most ``max_depth`` unfinished suffixes of the sequence grows by one token); nothing
is ever rebuilt. :meth:`SuffixTree.remove` deletes a sequence (FIFO eviction of the global
tree). Edges are compressed: a node's edge label is ``max(1, length)`` tokens of a stored
sequence (``ref_seq``, ``ref_start``); a suffix that ends inside an edge splits it, so every
suffix ends at a node and counts stay exact.

Drafting (:meth:`SuffixTree.speculate`) follows the reference's ``SuffixTree::speculate``:
for match lengths 1, 2, ... the context's suffix is matched from the root (the loop stops at
the first length that fails); from each match a tree of at most ``alpha * match_len``
(``+ offset``, capped) tokens is grown best-first by cumulative probability, stopping below
``min_token_prob``; the draft with the highest score (sum of node probabilities) wins, ties to
the longer match.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field


class Node:
    """One tree node: the edge from its parent, its count and its children by first token."""

    __slots__ = ("children", "count", "length", "ref_seq", "ref_start")

    def __init__(self, ref_seq: int, ref_start: int, length: int, count: int) -> None:
        self.ref_seq = ref_seq  # edge label = seqs[ref_seq][ref_start : ref_start + length]
        self.ref_start = ref_start
        self.length = length
        self.count = count
        self.children: dict[int, Node] = {}


@dataclass
class SpecDraft:
    """A draft tree grown from one match.

    Attributes:
        tokens: node token ids, in the order they were added (parents first).
        parents: parent index per node, -1 = child of the matched context (the root).
        probs: cumulative count-ratio probability of each node's path.
        match_len: length of the matched context suffix.
    """

    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    probs: list[float] = field(default_factory=list)
    match_len: int = 0

    @property
    def score(self) -> float:
        """Sum of the node probabilities (the reference's ranking of drafts)."""
        return float(sum(self.probs))

    def __len__(self) -> int:
        return len(self.tokens)


class SuffixTree:
    """Suffixes of many token sequences (see the module docstring)."""

    def __init__(self, max_depth: int) -> None:
        if max_depth < 1:
            raise ValueError(f"max_depth={max_depth}: must be >= 1")
        self.max_depth = max_depth
        self.root = Node(-1, 0, 0, 0)
        self.seqs: dict[int, list[int]] = {}
        self._active: dict[int, list[Node]] = {}  # unfinished suffixes' end nodes, oldest first
        self._refs: dict[int, int] = {}  # nodes whose label points into each sequence
        self._dead: set[int] = set()  # removed sequences still referenced by some label

    # ------------------------------------------------------------------ updates
    def extend(self, seq_id: int, tokens: list[int]) -> None:
        """Append ``tokens`` to sequence ``seq_id`` (created if new)."""
        for token in tokens:
            self.append(seq_id, token)

    def append(self, seq_id: int, token: int) -> None:
        """Append one token: every unfinished suffix of the sequence grows by it."""
        if seq_id in self._dead:
            raise ValueError(f"sequence {seq_id} was removed")
        seq = self.seqs.setdefault(seq_id, [])
        active = self._active.setdefault(seq_id, [])
        seq.append(token)
        active.append(self.root)  # the suffix that starts at this token
        pos = len(seq) - 1
        for i, node in enumerate(active):
            active[i] = self._grow(node, seq_id, pos, token)
        if len(active) >= self.max_depth:
            del active[0]  # that suffix now has max_depth tokens: finished

    def _grow(self, node: Node, seq_id: int, pos: int, token: int) -> Node:
        """Extend the suffix ending at ``node`` by ``token`` (at ``seqs[seq_id][pos]``)."""
        if node is not self.root and node.count == 1 and not node.children:
            self._point(node, seq_id, pos - node.length)  # only this suffix ends here
            node.length += 1
            return node
        child = node.children.get(token)
        if child is None:
            child = Node(seq_id, pos, 1, 1)
            self._refs[seq_id] = self._refs.get(seq_id, 0) + 1
            node.children[token] = child
            return child
        if child.length > 1:
            child = self._split(node, child, token)
        child.count += 1
        return child

    def _split(self, parent: Node, child: Node, token: int) -> Node:
        """Cut ``child``'s edge after its first token; returns the new upper node."""
        upper = Node(child.ref_seq, child.ref_start, 1, child.count)
        self._refs[child.ref_seq] += 1
        child.ref_start += 1
        child.length -= 1
        next_token = self.seqs[child.ref_seq][child.ref_start]
        upper.children[next_token] = child
        parent.children[token] = upper
        return upper

    def _point(self, node: Node, seq_id: int, start: int) -> None:
        """Re-point ``node``'s label into ``seq_id`` (same tokens, now extendable)."""
        if node.ref_seq != seq_id:
            self._release(node.ref_seq)
            self._refs[seq_id] = self._refs.get(seq_id, 0) + 1
        node.ref_seq, node.ref_start = seq_id, start

    def _release(self, seq_id: int) -> None:
        self._refs[seq_id] -= 1
        if self._refs[seq_id] == 0:
            del self._refs[seq_id]
            if seq_id in self._dead:
                self._dead.discard(seq_id)
                del self.seqs[seq_id]

    def remove(self, seq_id: int) -> None:
        """Delete every suffix of a sequence: counts drop, nodes that reach 0 are removed."""
        seq = self.seqs[seq_id]
        self._active.pop(seq_id, None)
        for start in range(len(seq)):
            self._remove_suffix(seq[start : start + self.max_depth])
        if seq_id in self._refs:
            self._dead.add(seq_id)  # labels of surviving nodes still read its tokens
        else:
            del self.seqs[seq_id]

    def _remove_suffix(self, suffix: list[int]) -> None:
        node, depth = self.root, 0
        while depth < len(suffix):
            child = node.children[suffix[depth]]
            child.count -= 1
            if child.count == 0 and node.children.get(suffix[depth]) is child:
                del node.children[suffix[depth]]  # its subtree holds only this suffix
            if child.count == 0:
                self._release(child.ref_seq)
            depth += max(child.length, 1)
            node = child

    # ------------------------------------------------------------------ queries
    def label(self, node: Node, offset: int) -> int:
        """Token at ``offset`` (0-based) of ``node``'s edge label."""
        return self.seqs[node.ref_seq][node.ref_start + offset]

    def match(self, pattern: list[int]) -> tuple[Node, int] | None:
        """Where ``pattern`` ends: (node, tokens of its edge consumed), None if absent."""
        node, used = self.root, 0
        for token in pattern:
            if used < node.length:
                if self.label(node, used) != token:
                    return None
                used += 1
                continue
            child = node.children.get(token)
            if child is None:
                return None
            node, used = child, 1
        return node, used

    def count(self, pattern: list[int]) -> int:
        """Occurrences of ``pattern`` (1 <= len <= max_depth) in the stored sequences."""
        found = self.match(pattern)
        return 0 if found is None else found[0].count

    def continuations(self, pattern: list[int]) -> dict[int, int]:
        """Count of every token seen right after ``pattern`` (``{}`` when absent)."""
        found = self.match(pattern)
        if found is None:
            return {}
        node, used = found
        if used < node.length:
            return {self.label(node, used): node.count}
        return {token: child.count for token, child in node.children.items()}

    def speculate(
        self,
        context: list[int],
        max_spec_tokens: int,
        alpha: float = 1.0,
        offset: float = 0.0,
        min_token_prob: float = 0.1,
        max_depth: int | None = None,
        tree: bool = True,
    ) -> SpecDraft:
        """Best draft over all matched suffixes of ``context`` (see the module docstring).

        Args:
            context: the tokens the draft continues (root last); only its last ``max_depth``
                tokens are used.
            max_spec_tokens: most draft nodes.
            alpha, offset: a match of m tokens allows ``int(alpha * m + offset)`` nodes.
            min_token_prob: smallest cumulative probability a node may have.
            max_depth: deepest node (None = unbounded).
            tree: grow a tree; False = a chain that always follows the most frequent child
                (the reference's path mode, vLLM's default).
        """
        context = context[-self.max_depth :]
        best = SpecDraft()
        for match_len in range(1, len(context)):
            found = self.match(context[len(context) - match_len :])
            if found is None:
                break
            budget = min(max_spec_tokens, int(match_len * alpha + offset + 1e-6))
            draft = self._grow_draft(found, max(budget, 0), min_token_prob, max_depth, tree)
            draft.match_len = match_len
            if draft.score >= best.score:
                best = draft
        return best

    def _grow_draft(
        self,
        start: tuple[Node, int],
        budget: int,
        min_prob: float,
        max_depth: int | None,
        tree: bool,
    ) -> SpecDraft:
        """Best-first tree (or greedy chain) from a matched position, by cumulative probability."""
        width = None if tree else 1
        draft = SpecDraft()
        tie = itertools.count()  # FIFO among equal probabilities
        heap: list[tuple[float, int, Node, int, int, int]] = []  # -prob, tie, node, used,
        # parent index, depth of the parent (root = 0)
        self._push_next(heap, tie, start[0], start[1], 1.0, -1, 0, min_prob, width)
        while heap and len(draft) < budget:
            neg, _, node, used, parent, depth = heapq.heappop(heap)
            draft.tokens.append(self.label(node, used - 1))
            draft.parents.append(parent)
            draft.probs.append(-neg)
            if max_depth is None or depth + 1 < max_depth:
                self._push_next(
                    heap, tie, node, used, -neg, len(draft) - 1, depth + 1, min_prob, width
                )
        return draft

    @staticmethod
    def _push_next(
        heap: list, tie: itertools.count, node: Node, used: int, prob: float, parent: int,
        depth: int, min_prob: float, width: int | None,
    ) -> None:  # fmt: skip
        """Push the positions one token below (node, used): inside the edge, or its children."""
        if used < node.length:
            heapq.heappush(heap, (-prob, next(tie), node, used + 1, parent, depth))
            return
        kept = [c for c in node.children.values() if prob * c.count / node.count >= min_prob]
        for child in sorted(kept, key=lambda c: -c.count)[:width]:
            p = prob * child.count / node.count
            heapq.heappush(heap, (-p, next(tie), child, 1, parent, depth))
