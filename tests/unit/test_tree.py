from __future__ import annotations

import pytest
import torch

from racer_bench.engine.structs import Draft, Source
from racer_bench.engine.tree import (
    TrieBuilder,
    ancestor_mask,
    check_draft,
    is_chain,
    node_depths,
    path_to,
    prune,
)

# root -> 0 -> 2 -> 4 ; root -> 1 -> 3 ; 0 -> 5
PARENTS = [-1, -1, 0, 1, 2, 0]


def test_depths_and_paths():
    assert node_depths(PARENTS) == [1, 1, 2, 2, 3, 2]
    assert path_to(4, PARENTS) == [0, 2, 4]
    assert path_to(3, PARENTS) == [1, 3]
    assert path_to(-1, PARENTS) == []


def test_ancestor_mask_matches_hand_drawn_tree():
    mask = ancestor_mask(PARENTS)
    assert mask.shape == (7, 7)
    assert mask[:, 0].all()  # everyone sees the root
    # node 4 (index 5) sees root, 0, 2, itself
    assert mask[5].nonzero().flatten().tolist() == [0, 1, 3, 5]
    # node 3 (index 4) sees root, 1, itself
    assert mask[4].nonzero().flatten().tolist() == [0, 2, 4]
    assert not mask[1, 2]  # siblings are invisible to each other


def test_ancestor_mask_matches_root_paths_on_random_trees():
    gen = torch.Generator().manual_seed(0)
    for n in (0, 1, 5, 17, 40):
        parents = [int(torch.randint(-1, i, (1,), generator=gen)) for i in range(n)]
        mask = ancestor_mask(parents)
        for node in range(n):
            expected = {0} | {k + 1 for k in path_to(node, parents)}
            assert set(mask[node + 1].nonzero().flatten().tolist()) == expected
        assert mask[0].tolist() == [True] + [False] * n


def test_is_chain():
    assert is_chain([-1, 0, 1, 2])
    assert is_chain([])
    assert not is_chain(PARENTS)


def test_check_draft_rejects_non_topological_and_over_budget():
    good = Draft(tokens=torch.arange(6), parents=torch.tensor(PARENTS))
    check_draft(good, budget=6)
    with pytest.raises(ValueError, match="budget"):
        check_draft(good, budget=5)
    with pytest.raises(ValueError, match="topological"):
        check_draft(Draft(tokens=torch.arange(2), parents=torch.tensor([1, -1])))


def test_prune_keeps_prefix_closed_tree():
    draft = Draft(tokens=torch.arange(10, 16), parents=torch.tensor(PARENTS))
    pruned = prune(draft, budget=10, max_depth=2)
    assert pruned.tokens.tolist() == [10, 11, 12, 13, 15]
    assert pruned.parents.tolist() == [-1, -1, 0, 1, 0]
    small = prune(draft, budget=3, max_depth=9)
    assert small.tokens.tolist() == [10, 11, 12]
    check_draft(small)


def test_trie_builder_merges_overlapping_paths_and_respects_capacity():
    trie = TrieBuilder(capacity=5)
    assert trie.add_path([1, 2, 3], Source.RETRIEVAL) == 3
    assert trie.add_path([1, 2, 4], Source.LOGITS) == 1  # shares the prefix 1, 2
    assert trie.add_path([5, 6, 7], Source.LOGITS) == 1  # only one node fits
    draft = trie.build()
    assert draft.tokens.tolist() == [1, 2, 3, 4, 5]
    assert draft.parents.tolist() == [-1, 0, 1, 1, -1]
    assert draft.source.tolist() == [1, 1, 1, 2, 2]
    assert trie.full
