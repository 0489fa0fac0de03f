"""RACER automaton on hand-made token sequences: trie, frequencies, links, borders, LRU."""

from __future__ import annotations

import random

import pytest

from methods.racer.automaton import ROOT, Automaton


def make(*patterns: list[int], **kwargs) -> Automaton:
    automaton = Automaton(**kwargs)
    for pattern in patterns:
        automaton.insert(pattern)
    return automaton


def live_nodes(a: Automaton) -> list[int]:
    """Every node reachable from the root."""
    out, stack = [], [ROOT]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(a.children[node].values())
    return out


def test_insert_counts_windows_through_every_node():
    a = make([1, 2, 3], [1, 2, 4], [2, 3, 5])
    assert a.freq[ROOT] == 3
    assert a.freq[a.walk([1])] == 2
    assert a.freq[a.walk([1, 2])] == 2
    assert a.freq[a.walk([1, 2, 3])] == 1
    assert a.freq[a.walk([2, 3])] == 1
    assert a.walk([3]) is None
    assert a.depth[a.walk([1, 2, 4])] == 3
    assert a.path(a.walk([2, 3, 5])) == [2, 3, 5]
    assert len(a) == 1 + 3 + 1 + 3  # root, 1, 12, 123, 124, 2, 23, 235


def test_exact_failure_links_are_longest_proper_suffixes():
    a = make([1, 2, 3], [2, 3, 4], [3, 9])
    assert a.fail_of(a.walk([1, 2, 3])) == a.walk([2, 3])
    assert a.fail_of(a.walk([1, 2])) == a.walk([2])
    assert a.fail_of(a.walk([2, 3])) == a.walk([3])
    assert a.fail_of(a.walk([2, 3, 4])) == ROOT  # neither "3 4" nor "4" is in the trie
    assert a.fail_of(a.walk([3, 9])) == ROOT
    a.insert([4, 7])  # a new node changes an existing node's link
    assert a.fail_of(a.walk([2, 3, 4])) == a.walk([4])


def test_build_matches_exact_links_and_lazy_touch_resets_them():
    patterns = [[1, 2, 3], [2, 3, 4], [3, 9], [2, 3, 9], [9, 1, 2]]
    exact = make(*patterns)
    lazy = make(*patterns, fail_links="lazy")
    lazy.build()
    for node in live_nodes(lazy)[1:]:
        path = lazy.path(node)
        assert exact.path(exact.fail_of(exact.walk(path))) == lazy.path(lazy.fail_of(node))
    n123 = lazy.walk([1, 2, 3])
    assert lazy.fail_of(n123) == lazy.walk([2, 3])
    lazy.touch_prefix(n123)  # the reference's quirk: the touched prefix forgets its links
    assert lazy.fail_of(n123) == ROOT
    assert lazy.fail_of(lazy.walk([1, 2])) == ROOT
    assert lazy.fail_of(lazy.walk([2, 3])) == lazy.walk([3])  # untouched nodes keep theirs


def test_suffix_chain_and_borders_follow_the_failure_chain():
    a = make([1, 2, 3], [2, 3, 4], [3, 9])
    chain = a.suffix_chain([7, 1, 2])
    assert chain == [a.walk([1, 2]), a.walk([2]), ROOT]
    borders, state = a.borders(3, chain)
    assert borders == [a.walk([1, 2, 3]), a.walk([2, 3])]  # deepest first; "3" has depth 1
    assert state == a.walk([1, 2, 3])
    strict = make([1, 2, 3], [2, 3, 4], [3, 9], min_depth=3)
    assert strict.borders(3, strict.suffix_chain([7, 1, 2]))[0] == [strict.walk([1, 2, 3])]
    assert a.borders(8, chain) == ([], None)  # no match: the state stays where it was


def test_lazy_state_advances_over_tokens_through_failure_links():
    a = make([1, 2, 3], [2, 3, 4], [3, 9], fail_links="lazy")
    a.build()
    a.advance([1, 2])
    assert a.state == a.walk([1, 2])
    assert a.lazy_chain() == [a.walk([1, 2]), a.walk([2]), ROOT]
    a.advance([3, 4])  # "1 2 3" has no child 4: fall back to "2 3" and take its child
    assert a.state == a.walk([2, 3, 4])
    a.advance([5])
    assert a.state == ROOT


def test_select_keeps_most_frequent_nodes_bfs_and_prefix_closed():
    a = make(*([[5, 1, 2]] * 3 + [[5, 1, 3]] + [[5, 4, 6]] * 2))
    border = a.walk([5])
    n51, n54, n512 = a.walk([5, 1]), a.walk([5, 4]), a.walk([5, 1, 2])
    assert a.select([border], budget=2, max_depth=5) == [n51, n512]
    assert a.select([border], budget=3, max_depth=5) == [n51, n54, n512]  # tie: shallower wins
    assert a.select([border], budget=5, max_depth=1) == [n51, n54]
    assert a.select([border], budget=0, max_depth=5) == []
    assert len(a.select([border], budget=10, max_depth=5)) == 5


def test_select_equals_full_search_on_random_tries():
    rng = random.Random(0)
    for _ in range(20):
        a = make(*[[rng.randrange(4) for _ in range(5)] for _ in range(30)])
        borders = list(a.children[ROOT].values())[:2]
        budget = rng.randrange(1, 12)
        got = a.select(borders, budget, max_depth=5)
        assert len(got) == len(set(got)) <= budget
        kept = set(got) | set(borders)
        assert all(a.parent[n] in kept for n in got)  # every path is intact
        below = [n for n in live_nodes(a) if n not in borders and _under(a, n, borders)]
        best = sorted(below, key=lambda n: (-a.freq[n], a.depth[n]))[:budget]
        assert sorted(a.freq[n] for n in got) == sorted(a.freq[n] for n in best)


def _under(a: Automaton, node: int, borders: list[int]) -> bool:
    while node != ROOT:
        node = a.parent[node]
        if node in borders:
            return True
    return False


def test_lru_evicts_the_least_recent_leaf():
    a = make([1, 2], [3, 4], max_nodes=5)  # root + 4 nodes: full
    a.insert([1, 5])
    assert a.walk([1, 2]) is None and a.walk([1, 5]) is not None
    assert a.walk([3, 4]) is not None
    a.insert([3, 4])  # touch: "1 5" is now the oldest leaf
    a.insert([6])
    assert a.walk([1, 5]) is None and a.walk([1]) is not None and a.walk([6]) is not None
    assert len(a) == 5 and a.evictions == 2


def test_lru_never_evicts_the_path_being_extended():
    a = make([1, 2], [3, 4], max_nodes=5)
    a.insert([1, 2, 9])  # "1 2" is the oldest leaf, but the new node hangs below it
    assert a.walk([1, 2, 9]) is not None
    assert a.walk([3, 4]) is None


def test_lru_pool_stays_bounded_and_consistent():
    rng = random.Random(1)
    a = Automaton(max_nodes=40)
    for _ in range(400):
        a.insert([rng.randrange(6) for _ in range(5)])  # evicting a non-leaf would raise
        assert len(a) <= 40
    assert a.evictions > 0
    nodes = live_nodes(a)
    assert len(nodes) == len(a)
    for node in nodes[1:]:
        assert a.children[a.parent[node]][a.token[node]] == node
        assert a.freq[node] >= sum(a.freq[c] for c in a.children[node].values())


def test_unbounded_mode_keeps_everything():
    rng = random.Random(2)
    a = Automaton(max_nodes=5, lru=False)
    patterns = [[rng.randrange(50) for _ in range(4)] for _ in range(30)]
    for pattern in patterns:
        a.insert(pattern)
    assert a.evictions == 0 and len(a) > 5
    assert all(a.walk(p) is not None for p in patterns)


def test_recycled_state_and_link_targets_fall_back_to_root():
    a = make([2, 3, 4], [1, 2, 3], max_nodes=8, fail_links="lazy")
    a.build()
    n23, n123 = a.walk([2, 3]), a.walk([1, 2, 3])
    assert a.fail_of(n123) == n23
    a.state = n23
    a.insert([7, 8])  # takes the last free slot, then recycles "2 3 4"
    a.insert([9])  # recycles "2 3": the state and the link target of "1 2 3"
    assert a.walk([2, 3]) is None and a.walk([9]) == n23
    assert a.state == ROOT
    assert a.fail_of(n123) == ROOT


def test_rejects_bad_configuration():
    with pytest.raises(ValueError):
        Automaton(fail_links="ac")
    with pytest.raises(ValueError):
        Automaton(max_nodes=1)
