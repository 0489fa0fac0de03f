"""RACER's retrieval index: an Aho-Corasick automaton over context n-grams in a bounded pool.

Every length-``ngram`` window of the context is inserted into a trie; a node's ``freq`` counts
the inserted windows whose prefix is the node's path. The pool holds at most ``max_nodes``
nodes (root included) and recycles the least-recently-used *leaf*: touching a node also touches
all its ancestors, after it, so an ancestor is never older than its descendants and the oldest
node is always a leaf. ``lru=False`` gives an unbounded pool.

Failure links come in two flavours (``fail_links``):

* ``"exact"``: the paper's Aho-Corasick semantics at every step. The state and its failure
  chain are "every trie node whose path is a suffix of the context", deepest first; they are
  computed directly from the last ``ngram - 1`` context tokens (at most ~50 dict look-ups),
  so inserting and evicting nodes can never leave a stale link behind.
* ``"lazy"``: the reference code (hkr04/RACER ``automaton.cpp``): links are rebuilt by
  :meth:`Automaton.build` after the prompt only; new nodes start with ``fail = root`` and
  "touching a prefix" (borders, fail transitions) resets the links on that prefix to the root,
  so during decoding the failure chain soon collapses to the current state plus the root. The
  state is advanced over accepted tokens only (not over the prompt) and is kept when no state
  matches the next token.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Sequence

ROOT = 0
FAIL_LINKS = ("exact", "lazy")


class Automaton:
    """A trie of context n-grams with frequencies, failure links and LRU leaf eviction.

    Nodes are integer ids into parallel lists (``children``, ``parent``, ``token``, ``freq``,
    ``depth``); id 0 is the root, which is never evicted.
    """

    def __init__(
        self,
        max_nodes: int = 10000,
        min_depth: int = 2,
        lru: bool = True,
        fail_links: str = "exact",
    ) -> None:
        if fail_links not in FAIL_LINKS:
            raise ValueError(f"fail_links={fail_links}: allowed values are exact, lazy")
        if lru and max_nodes < 2:
            raise ValueError(f"max_nodes={max_nodes}: need at least the root and one node")
        self.max_nodes = max_nodes
        self.min_depth = max(min_depth, 1)
        self.lru = lru
        self.fail_links = fail_links
        self.clear()

    def clear(self) -> None:
        """Drop every node except the root and reset the state."""
        self.children: list[dict[int, int]] = [{}]
        self.parent: list[int] = [-1]
        self.token: list[int] = [-1]
        self.freq: list[int] = [0]
        self.depth: list[int] = [0]
        self.fail: list[int] = [ROOT]
        self.gen: list[int] = [0]  # bumped on recycling: detects links to a recycled node
        self.fail_gen: list[int] = [0]
        self._recent: OrderedDict[int, None] = OrderedDict()  # oldest first; root excluded
        self.state = ROOT
        self.evictions = 0

    def __len__(self) -> int:
        """Live nodes, root included."""
        return len(self._recent) + 1 if self.lru else len(self.children)

    # ----------------------------------------------------------------- pool and LRU
    def touch(self, node: int) -> None:
        """Mark ``node`` and then its ancestors most recently used (ancestors end up newest)."""
        if not self.lru:
            return
        recent, parent = self._recent, self.parent
        while node != ROOT:
            recent.move_to_end(node)
            node = parent[node]

    def _new_node(self, parent: int, token: int) -> int:
        """A fresh child of ``parent``; recycles the LRU leaf when the pool is full."""
        if self.lru and len(self._recent) + 1 >= self.max_nodes:
            node = self._evict()
            self.parent[node], self.token[node] = parent, token
            self.freq[node], self.depth[node] = 0, self.depth[parent] + 1
            self._set_fail(node, ROOT)
        else:
            node = len(self.children)
            self.children.append({})
            self.parent.append(parent)
            self.token.append(token)
            self.freq.append(0)
            self.depth.append(self.depth[parent] + 1)
            self.fail.append(ROOT)
            self.gen.append(0)
            self.fail_gen.append(0)
        self.children[parent][token] = node
        if self.lru:
            self._recent[node] = None
        return node

    def _evict(self) -> int:
        """Detach the least recently used node (always a leaf) and return its slot."""
        node, _ = self._recent.popitem(last=False)
        if self.children[node]:
            raise RuntimeError(f"LRU tail {node} has children: the touch invariant is broken")
        del self.children[self.parent[node]][self.token[node]]
        self.gen[node] += 1
        self.evictions += 1
        if self.state == node:
            self.state = ROOT
        return node

    # ----------------------------------------------------------------- insertion
    def insert(self, pattern: Sequence[int], freq: int = 1) -> None:
        """Insert one n-gram: every node on its path gains ``freq``."""
        node = ROOT
        self.freq[ROOT] += freq
        protected = False
        for token in pattern:
            nxt = self.children[node].get(token)
            if nxt is None:
                if self.lru and not protected:
                    self.touch(node)  # the path so far must outlive this insertion's evictions
                    protected = True
                nxt = self._new_node(node, token)
            node = nxt
            self.freq[node] += freq
        self.touch(node)

    def walk(self, tokens: Sequence[int], start: int = ROOT) -> int | None:
        """The node reached from ``start`` along ``tokens``, or None if the path is missing."""
        children = self.children
        node: int | None = start
        for token in tokens:
            node = children[node].get(token)
            if node is None:
                return None
        return node

    def path(self, node: int) -> list[int]:
        """Token path from the root to ``node``."""
        out: list[int] = []
        while node != ROOT:
            out.append(self.token[node])
            node = self.parent[node]
        return out[::-1]

    # ----------------------------------------------------------------- failure links
    def _set_fail(self, node: int, target: int) -> None:
        self.fail[node] = target
        self.fail_gen[node] = self.gen[target]

    def fail_of(self, node: int) -> int:
        """Failure link: the node of the longest proper suffix of ``node``'s path in the trie.

        ``exact`` computes it from the current trie; ``lazy`` returns the stored link (the root
        when it was reset or its target has been recycled since).
        """
        if node == ROOT:
            return ROOT
        if self.fail_links == "lazy":
            return self.stored_fail(node)
        path = self.path(node)
        for i in range(1, len(path)):
            found = self.walk(path[i:])
            if found is not None:
                return found
        return ROOT

    def stored_fail(self, node: int) -> int:
        """The stored link (root when its target has been recycled since it was set)."""
        target = self.fail[node]
        return target if self.gen[target] == self.fail_gen[node] else ROOT

    def build(self) -> None:
        """Recompute every stored failure link by BFS (standard Aho-Corasick construction)."""
        children = self.children
        queue = list(children[ROOT].values())
        for node in queue:
            self._set_fail(node, ROOT)
        for node in queue:  # the list grows while it is scanned: a BFS
            for token, child in children[node].items():
                f = self.stored_fail(node)
                while f != ROOT and token not in children[f]:
                    f = self.stored_fail(f)
                self._set_fail(child, children[f].get(token, ROOT))
                queue.append(child)

    def touch_prefix(self, node: int) -> None:
        """Touch ``node`` and its ancestors; in ``lazy`` mode also reset their links to root."""
        self.touch(node)
        if self.fail_links == "lazy":
            while node != ROOT:
                self._set_fail(node, ROOT)
                node = self.parent[node]

    # ----------------------------------------------------------------- matching
    def suffix_chain(self, tail: Sequence[int]) -> list[int]:
        """Exact AC state after ``tail`` and its failure chain: trie nodes whose path is a
        suffix of ``tail``, deepest first, ending with the root."""
        chain: list[int] = []
        n = len(tail)
        for d in range(n, 0, -1):
            node = self.walk(tail[n - d :])
            if node is not None:
                chain.append(node)
        chain.append(ROOT)
        return chain

    def lazy_chain(self) -> list[int]:
        """The stored failure chain from the current state down to the root."""
        chain = [self.state]
        node = self.state
        while node != ROOT:
            node = self.fail_of(node)
            chain.append(node)
        return chain

    def borders(self, next_token: int, chain: Sequence[int]) -> tuple[list[int], int | None]:
        """Children labelled ``next_token`` of the states in ``chain`` (deepest first).

        Returns:
            (borders, new_state): the children of depth >= ``min_depth`` (touched), and the
            deepest such child of any depth (the state after ``next_token``; None = no match).
        """
        found: list[int] = []
        new_state: int | None = None
        for node in chain:
            child = self.children[node].get(next_token)
            if child is None:
                continue
            if new_state is None:
                new_state = child
            if self.depth[child] >= self.min_depth:
                found.append(child)
        for node in found:
            self.touch_prefix(node)
        return found, new_state

    def advance(self, tokens: Sequence[int]) -> None:
        """Move the stored state over ``tokens`` (``lazy`` mode's ``trans_tokens``)."""
        node, children = self.state, self.children
        for token in tokens:
            if token not in children[node]:
                while node != ROOT and token not in children[node]:
                    node = self.fail_of(node)
                self.touch_prefix(node)
            node = children[node].get(token, node)
        self.touch(node)
        self.state = node

    # ----------------------------------------------------------------- retrieval tree
    def continuations(self, node: int, window: int | None) -> tuple[int, dict[int, int]]:
        """The node whose children continue ``node``'s path, and those children.

        That is ``node`` itself, except for a childless node whose path is a full ``window``
        (None = never): then the longest proper suffix of its path, of at least
        ``min_depth - 1`` tokens, that has children, so a copied passage goes on past the
        window length (the trie stores windows of ``ngram`` tokens only).
        """
        children = self.children
        if children[node] or window is None or self.depth[node] < window:
            return node, children[node]
        path = self.path(node)
        for i in range(1, len(path) - self.min_depth + 2):
            found = self.walk(path[i:])
            if found is not None and children[found]:
                return found, children[found]
        return node, children[node]

    def select(self, borders: Sequence[int], budget: int, max_depth: int) -> list[int]:
        """The ``budget`` most frequent nodes below ``borders``, BFS layer by layer.

        Ties on frequency keep the shallower node. A layer that admits nothing ends the search;
        since a child is never more frequent than its parent, only admitted nodes are expanded
        (the result equals a full BFS of the subtrees). Returns the kept nodes in BFS order, so
        every node's parent is a border or an earlier kept node.
        """
        freq, depth, children = self.freq, self.depth, self.children
        heap: list[tuple[int, int, int]] = []  # (freq, -depth, node): the worst on top
        kept: set[int] = set()
        order: list[int] = []
        layer = [c for b in borders for c in children[b].values()]
        rel = 1
        while layer and rel <= max_depth and budget > 0:
            admitted = []
            for node in layer:
                item = (freq[node], -depth[node], node)
                if len(heap) < budget:
                    heapq.heappush(heap, item)
                elif item[0] > heap[0][0]:
                    kept.discard(heapq.heappushpop(heap, item)[2])
                else:
                    continue
                kept.add(node)
                admitted.append(node)
            order += admitted
            layer = [c for node in admitted if node in kept for c in children[node].values()]
            rel += 1
        return [node for node in order if node in kept]
