"""Suffix automata: construction, occurrence counts, earliest ends, matching (no model)."""

from __future__ import annotations

import random

import pytest

from methods.common.suffix_automaton import FrozenAutomaton, Match, SuffixAutomaton


def walk(automaton, pattern: list[int]) -> int:
    """State reached by reading ``pattern`` from the start state, -1 if it is no substring."""
    state = 0
    for token in pattern:
        state = automaton.step(state, token)
        if state == -1:
            return -1
    return state


def occurrences(text: list[int], pattern: list[int]) -> list[int]:
    """End indices of every occurrence of ``pattern`` in ``text``."""
    n = len(pattern)
    return [i + n - 1 for i in range(len(text) - n + 1) if text[i : i + n] == pattern]


def substrings(text: list[int]) -> set[tuple[int, ...]]:
    return {tuple(text[i:j]) for i in range(len(text)) for j in range(i + 1, len(text) + 1)}


def test_known_string():
    sam = SuffixAutomaton()
    sam.extend([1, 2, 1, 2, 3])
    state = walk(sam, [1, 2])
    assert sam.counts()[state] == 2
    assert sam.first_end[state] == 1
    assert sam.continuation(state, 3) == [1, 2, 3]
    assert walk(sam, [2, 2]) == -1
    assert sam.length[walk(sam, [2])] == 2  # "2" and "1 2" always end together


@pytest.mark.parametrize("seed", range(4))
def test_random_text_against_brute_force(seed):
    rng = random.Random(seed)
    text = [rng.randrange(3) for _ in range(40)]
    sam = SuffixAutomaton()
    sam.extend(text)
    assert len(sam) <= 2 * len(text)  # linear size
    counts = sam.counts()
    frozen = sam.freeze()
    for sub in substrings(text):
        pattern = list(sub)
        state = walk(sam, pattern)
        ends = occurrences(text, pattern)
        assert state != -1 and counts[state] == len(ends)
        assert sam.first_end[state] == ends[0]
        assert walk(frozen, pattern) == state
        assert frozen.count[state] == len(ends)
    for pattern in ([3], [0, 3], [2] * 41):
        assert walk(sam, pattern) == walk(frozen, pattern) == -1


@pytest.mark.parametrize("seed", range(4))
def test_match_is_the_longest_suffix_seen_before(seed):
    """Advance the match, then insert the token: the match never points at the text's end."""
    rng = random.Random(100 + seed)
    text = [rng.randrange(3) for _ in range(60)]
    sam, match = SuffixAutomaton(), Match()
    for i, token in enumerate(text):
        match.advance(sam, token)
        sam.append(token)
        match.normalize(sam)
        seen = text[: i + 1]
        expected = 0
        for n in range(1, i + 1):  # longest suffix that ends before the last token
            if occurrences(seen[:-1], seen[-n:]):
                expected = n
        assert match.length == expected
        if expected:
            first = occurrences(seen[:-1], seen[-expected:])[0]
            assert sam.continuation(match.state, 5) == seen[first + 1 : first + 6]


def test_static_match_follows_a_frozen_automaton(tmp_path):
    sam = SuffixAutomaton()
    sam.extend([5, 6, 7, 8, 9, 5, 6, 1])
    frozen = FrozenAutomaton.load(sam.freeze({"corpus": "x"}).save(tmp_path / "sam.npz"))
    assert frozen.meta == {"corpus": "x"}
    match = Match()
    for token, length in [(4, 0), (5, 1), (6, 2), (7, 3), (3, 0), (6, 1), (1, 2)]:
        match.advance(frozen, token)
        assert match.length == length
    assert dict(frozen.children(walk(frozen, [5, 6]))) == {1: walk(frozen, [5, 6, 1]),
                                                         7: walk(frozen, [5, 6, 7])}  # fmt: skip
