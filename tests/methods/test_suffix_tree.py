"""Depth-capped suffix tree: counts, incremental appends, removal and drafting (no model)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from methods.common.suffix_tree import SuffixTree


def naive_counts(seqs: list[list[int]], max_depth: int) -> Counter:
    """Occurrences of every substring of length <= max_depth."""
    counts: Counter = Counter()
    for seq in seqs:
        for i in range(len(seq)):
            for n in range(1, min(max_depth, len(seq) - i) + 1):
                counts[tuple(seq[i : i + n])] += 1
    return counts


def check_against_naive(tree: SuffixTree, seqs: list[list[int]]) -> None:
    expected = naive_counts(seqs, tree.max_depth)
    for pattern, n in expected.items():
        assert tree.count(list(pattern)) == n, pattern
    # no stored string that the sequences lack: walk every node
    stack = [(tree.root, ())]
    while stack:
        node, prefix = stack.pop()
        for child in node.children.values():
            label = tuple(tree.label(child, k) for k in range(child.length))
            full = prefix + label
            assert expected[full] == child.count > 0, full
            assert sum(c.count for c in child.children.values()) <= child.count
            stack.append((child, full))


def test_counts_on_a_known_string():
    tree = SuffixTree(max_depth=8)
    tree.extend(0, [1, 2, 3, 1, 2])  # "abcab"
    assert tree.count([1, 2]) == 2
    assert tree.count([1, 2, 3]) == 1
    assert tree.count([2, 3, 1, 2]) == 1
    assert tree.count([3, 2]) == 0
    assert tree.continuations([1, 2]) == {3: 1}  # the last "ab" has no continuation yet
    assert tree.continuations([1]) == {2: 2}
    tree.append(0, 4)
    assert tree.continuations([1, 2]) == {3: 1, 4: 1}


def test_depth_cap_limits_stored_strings():
    tree = SuffixTree(max_depth=3)
    tree.extend(0, [5, 6, 7, 8, 9])
    assert tree.count([5, 6, 7]) == 1
    assert tree.count([5, 6, 7, 8]) == 0  # 4 tokens > max_depth
    assert tree.count([7, 8, 9]) == 1


@pytest.mark.parametrize("max_depth", [1, 2, 5, 64])
def test_incremental_appends_match_naive_counts(max_depth):
    rng = random.Random(max_depth)
    tree = SuffixTree(max_depth)
    seqs: dict[int, list[int]] = {0: [], 1: [], 2: []}
    for _ in range(300):  # interleaved appends, small alphabet: many repeats and splits
        sid = rng.randrange(3)
        token = rng.randrange(4)
        seqs[sid].append(token)
        tree.append(sid, token)
    check_against_naive(tree, list(seqs.values()))


def test_remove_restores_the_other_sequences_counts():
    rng = random.Random(7)
    seqs = {sid: [rng.randrange(3) for _ in range(60)] for sid in range(4)}
    tree = SuffixTree(max_depth=6)
    for sid, seq in seqs.items():
        tree.extend(sid, seq)
    tree.remove(1)
    tree.remove(3)
    check_against_naive(tree, [seqs[0], seqs[2]])
    tree.extend(5, seqs[1][:20])  # labels may still read removed tokens: appends stay exact
    tree.extend(0, [0, 1, 2])
    check_against_naive(tree, [seqs[0] + [0, 1, 2], seqs[2], seqs[1][:20]])
    for sid in (0, 2, 5):
        tree.remove(sid)
    assert tree.root.children == {}
    assert tree.seqs == {}  # no token list is kept once nothing refers to it


def test_speculate_copies_the_only_continuation():
    tree = SuffixTree(max_depth=16)
    tree.extend(0, [1, 2, 3, 4, 5, 9, 1, 2])  # "1 2" seen before, followed by 3 4 5 9
    draft = tree.speculate([9, 1, 2], max_spec_tokens=10, alpha=1.0, min_token_prob=0.1)
    assert draft.match_len == 2
    assert draft.tokens == [3, 4]  # alpha * match_len tokens
    assert draft.parents == [-1, 0]
    # the current "1 2" is stored too (no continuation): seen twice, continued once -> 0.5
    assert draft.probs == [0.5, 0.5]
    assert draft.score == 1.0
    longer = tree.speculate([9, 1, 2], max_spec_tokens=3, alpha=2.0, min_token_prob=0.1)
    assert longer.tokens == [3, 4, 5]  # capped by max_spec_tokens


def test_speculate_grows_a_tree_best_first_above_min_prob():
    tree = SuffixTree(max_depth=16)
    for sid, seq in enumerate([[7, 1, 2], [7, 1, 2], [7, 1, 3], [7, 4]]):
        tree.extend(sid, seq)
    draft = tree.speculate([0, 7], max_spec_tokens=10, alpha=8.0, min_token_prob=0.2)
    # after 7: 1 (3/4), then 2 (2/4), 3 (1/4); 4 (1/4)
    assert draft.tokens == [1, 2, 4, 3]
    assert draft.parents == [-1, 0, -1, 0]
    assert draft.probs == [0.75, 0.5, 0.25, 0.25]
    strict = tree.speculate([0, 7], max_spec_tokens=10, alpha=8.0, min_token_prob=0.3)
    assert strict.tokens == [1, 2]
    capped = tree.speculate([0, 7], max_spec_tokens=2, alpha=8.0, min_token_prob=0.2)
    assert capped.tokens == [1, 2]
    shallow = tree.speculate([0, 7], 10, alpha=8.0, min_token_prob=0.2, max_depth=1)
    assert shallow.tokens == [1, 4]


def test_speculate_prefers_the_higher_score_and_stops_at_the_first_failed_match():
    tree = SuffixTree(max_depth=16)
    tree.extend(0, [5, 1, 2, 8, 8, 8, 8])
    tree.extend(1, [6, 1, 2, 3])
    # "1 2" (2 tokens, score 0.5 + 0.5) loses to "5 1 2" (3 tokens, certain: score 3)
    draft = tree.speculate([0, 5, 1, 2], max_spec_tokens=8, alpha=1.0, min_token_prob=0.1)
    assert draft.match_len == 3 and draft.tokens == [8, 8, 8]
    short = tree.speculate([5, 1, 2], max_spec_tokens=8, alpha=1.0, min_token_prob=0.1)
    assert short.match_len == 2 and short.tokens == [8, 3]  # the full context is never tried
    assert tree.speculate([4, 4], 8).tokens == []  # 4 was never seen
    assert tree.speculate([2], 8).tokens == []  # a one-token context tries no match
