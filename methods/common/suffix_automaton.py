"""Suffix automata over token sequences: an online one and a frozen, array-backed one.

The structures SAM-Decoding drafts from (Hu et al., ACL 2025). A suffix automaton of a text
has one state per class of substrings that end at the same set of positions (``endpos``); a
state stores the longest length of its class (``length``), its suffix link (the state of the
longest suffix in another class) and its transitions. Built online in amortised O(1) per
token (Blumer et al. 1985).

* :class:`SuffixAutomaton` grows with the text (:meth:`SuffixAutomaton.append`); each state
  also keeps ``first_end``, the end index of the class's earliest occurrence, from which a
  draft copies what followed.
* :class:`FrozenAutomaton` is a built automaton packed into numpy arrays (transitions sorted per
  state) with ``count``, the number of occurrences of each class (``|endpos|``); it is what
  ``scripts/build_sam_corpus.py`` saves for a corpus, and it never changes while decoding.
* :class:`Match` is the longest suffix of a token stream that occurs in an automaton, moved one
  token at a time.
"""

from __future__ import annotations

import bisect
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np


class Automaton(Protocol):
    """What :class:`Match` needs: transitions, suffix links and lengths."""

    def step(self, state: int, token: int) -> int:
        """Target of ``state``'s transition on ``token``, -1 if none."""

    def link_of(self, state: int) -> int: ...

    def length_of(self, state: int) -> int: ...


class SuffixAutomaton:
    """Online suffix automaton of one growing token sequence (state 0 = the empty string)."""

    def __init__(self) -> None:
        self.next: list[dict[int, int]] = [{}]
        self.link: list[int] = [-1]
        self.length: list[int] = [0]
        self.first_end: list[int] = [-1]  # end index (0-based) of the class's first occurrence
        self.is_clone: list[bool] = [False]
        self.tokens: list[int] = []
        self.last = 0

    def __len__(self) -> int:
        return len(self.length)

    def extend(self, tokens: list[int]) -> None:
        for token in tokens:
            self.append(token)

    def append(self, token: int) -> None:
        """Add one token at the end of the text."""
        end = len(self.tokens)
        self.tokens.append(token)
        cur = self._new_state(self.length[self.last] + 1, end, clone=False)
        p = self.last
        while p != -1 and token not in self.next[p]:
            self.next[p][token] = cur
            p = self.link[p]
        if p == -1:
            self.link[cur] = 0
        else:
            q = self.next[p][token]
            if self.length[p] + 1 == self.length[q]:
                self.link[cur] = q
            else:
                self.link[cur] = self._clone(p, q, token)
        self.last = cur

    def _new_state(self, length: int, first_end: int, clone: bool) -> int:
        self.next.append({})
        self.link.append(-1)
        self.length.append(length)
        self.first_end.append(first_end)
        self.is_clone.append(clone)
        return len(self.length) - 1

    def _clone(self, p: int, q: int, token: int) -> int:
        """Split ``q``: its strings of length <= len(p) + 1 move to a clone (same first end)."""
        clone = self._new_state(self.length[p] + 1, self.first_end[q], clone=True)
        self.next[clone] = dict(self.next[q])
        self.link[clone] = self.link[q]
        self.link[q] = clone
        while p != -1 and self.next[p].get(token) == q:
            self.next[p][token] = clone
            p = self.link[p]
        return clone

    def step(self, state: int, token: int) -> int:
        return self.next[state].get(token, -1)

    def link_of(self, state: int) -> int:
        return self.link[state]

    def length_of(self, state: int) -> int:
        return self.length[state]

    def continuation(self, state: int, n: int) -> list[int]:
        """Up to ``n`` tokens that followed the earliest occurrence of ``state``'s class."""
        start = self.first_end[state] + 1
        return self.tokens[start : start + n]

    def counts(self) -> list[int]:
        """Occurrences (``|endpos|``) of every state's class."""
        count = [0 if clone else 1 for clone in self.is_clone]
        count[0] = 0
        for state in sorted(range(1, len(self)), key=self.length.__getitem__, reverse=True):
            count[self.link[state]] += count[state]
        return count

    def freeze(self, meta: dict[str, Any] | None = None) -> FrozenAutomaton:
        """Pack into arrays, with occurrence counts (see :class:`FrozenAutomaton`)."""
        starts = [0]
        tokens: list[int] = []
        targets: list[int] = []
        for moves in self.next:
            for token in sorted(moves):
                tokens.append(token)
                targets.append(moves[token])
            starts.append(len(tokens))
        return FrozenAutomaton(
            trans_start=np.asarray(starts, dtype=np.int64),
            trans_token=np.asarray(tokens, dtype=np.int64),
            trans_target=np.asarray(targets, dtype=np.int64),
            link=np.asarray(self.link, dtype=np.int64),
            length=np.asarray(self.length, dtype=np.int64),
            count=np.asarray(self.counts(), dtype=np.int64),
            meta=dict(meta or {}),
        )


@dataclass
class FrozenAutomaton:
    """A read-only suffix automaton in arrays (S states, E transitions).

    Attributes:
        trans_start: int64[S+1]; state ``s``'s transitions are rows ``trans_start[s]`` to
            ``trans_start[s+1]`` of ``trans_token`` (sorted) and ``trans_target``.
        trans_token: int64[E] token of each transition.
        trans_target: int64[E] target state of each transition.
        link: int64[S] suffix link (-1 for state 0).
        length: int64[S] longest string length of each class.
        count: int64[S] occurrences of each class in the text.
        meta: provenance (corpus, tokenizer, vocab size, separator, ...).
    """

    trans_start: np.ndarray
    trans_token: np.ndarray
    trans_target: np.ndarray
    link: np.ndarray
    length: np.ndarray
    count: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)
    _link: list[int] = field(init=False, repr=False)
    _length: list[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._link = self.link.tolist()  # Python lists: scalar reads are ~10x faster
        self._length = self.length.tolist()

    def __len__(self) -> int:
        return len(self.length)

    def step(self, state: int, token: int) -> int:
        lo, hi = int(self.trans_start[state]), int(self.trans_start[state + 1])
        i = bisect.bisect_left(self.trans_token, token, lo, hi)
        return int(self.trans_target[i]) if i < hi and self.trans_token[i] == token else -1

    def link_of(self, state: int) -> int:
        return self._link[state]

    def length_of(self, state: int) -> int:
        return self._length[state]

    def children(self, state: int) -> list[tuple[int, int]]:
        """(token, target state) of every transition of ``state``."""
        lo, hi = int(self.trans_start[state]), int(self.trans_start[state + 1])
        return list(zip(self.trans_token[lo:hi].tolist(), self.trans_target[lo:hi].tolist(),
                        strict=True))  # fmt: skip

    def save(self, path: str | Path) -> Path:
        """Write one ``.npz`` atomically (a half-written file is never picked up)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npz")
        arrays = {k: getattr(self, k) for k in ARRAYS}
        np.savez(tmp, meta=np.array(json.dumps(self.meta)), **arrays)
        tmp.replace(path)
        return path

    @staticmethod
    def load(path: str | Path) -> FrozenAutomaton:
        with np.load(Path(path).expanduser()) as data:
            arrays = {k: data[k] for k in ARRAYS}
            return FrozenAutomaton(**arrays, meta=json.loads(str(data["meta"])))


ARRAYS = ("trans_start", "trans_token", "trans_target", "link", "length", "count")


class Match:
    """Longest suffix of a token stream that occurs in an automaton: (state, length)."""

    def __init__(self) -> None:
        self.state = 0
        self.length = 0

    def advance(self, automaton: Automaton, token: int) -> None:
        """Extend the stream by ``token`` (shorten the match until it can be extended)."""
        state, length = self.state, self.length
        while state != -1 and automaton.step(state, token) == -1:
            state = automaton.link_of(state)
            length = automaton.length_of(state) if state != -1 else 0
        if state == -1:
            self.state, self.length = 0, 0
        else:
            self.state, self.length = automaton.step(state, token), length + 1

    def normalize(self, automaton: Automaton) -> None:
        """Move to the state whose class holds the match (a clone may have taken it)."""
        link = automaton.link_of(self.state)
        while link != -1 and self.length <= automaton.length_of(link):
            self.state, link = link, automaton.link_of(link)
