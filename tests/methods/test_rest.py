"""REST drafter: draft trees from retrieved continuations (no model needed)."""

from __future__ import annotations

import numpy as np
import pytest

from methods.common.datastore import Datastore, separator_for, token_dtype
from methods.rest import RestDrafter, retrieve_draft
from racer_bench.engine.structs import DraftContext, Source
from racer_bench.engine.tree import check_draft, node_depths, path_to

SEP = separator_for(260)
CORPUS = [1, 2, 3, 4, SEP, 1, 2, 3, 5, SEP, 1, 2, 6, SEP, 7, 1, 2, 3, 4, SEP]


def make_store(tokens: list[int] = CORPUS) -> Datastore:
    array = np.asarray(tokens, dtype=token_dtype(260))
    return Datastore.from_tokens(array, SEP, {"vocab_size": 260})


def paths_of(draft) -> set[tuple[int, ...]]:
    tokens, parents = draft.tokens.tolist(), draft.parents.tolist()
    return {tuple(tokens[j] for j in path_to(i, parents)) for i in range(len(tokens))}


def test_tree_merges_the_most_frequent_continuations():
    # query [9, 1, 2]: [1, 2] matches 4 times; continuations 3 4 | 3 5 | 6 | 3 4
    draft = retrieve_draft(make_store(), [9, 1, 2], 64, 16, 2, 5000, 10)
    check_draft(draft)
    assert paths_of(draft) == {(3,), (3, 4), (3, 5), (6,)}
    assert len(draft) == 4  # shared prefixes are one node
    assert draft.tokens.tolist()[:2] == [3, 4]  # most frequent first: [3] (3x), [3, 4] (2x)
    assert set(draft.source.tolist()) == {int(Source.RETRIEVAL)}
    assert draft.meta == {"retrieval_found": 1.0, "match_span": 2.0, "n_matches": 4.0}


def test_longest_query_wins_and_limits_hold():
    store = make_store()
    draft = retrieve_draft(store, [7, 1, 2], 64, 16, 2, 5000, 10)
    assert paths_of(draft) == {(3,), (3, 4)}  # only "7 1 2" continues with 3 4
    assert draft.meta["match_span"] == 3.0
    small = retrieve_draft(store, [9, 1, 2], 2, 16, 2, 5000, 10)
    assert len(small) == 2 and paths_of(small) == {(3,), (3, 4)}
    shallow = retrieve_draft(store, [9, 1, 2], 64, 16, 2, 5000, 1)
    assert max(node_depths(shallow.parents.tolist())) == 1
    assert paths_of(shallow) == {(3,), (6,)}


def test_no_match_gives_an_empty_draft():
    draft = retrieve_draft(make_store(), [8, 8], 64, 16, 2, 5000, 10)
    assert len(draft) == 0
    assert draft.meta["retrieval_found"] == 0.0


def test_drafter_loads_a_prebuilt_datastore_and_respects_the_context(tmp_path):
    path = make_store().save(tmp_path / "ds.npz")
    drafter = RestDrafter(vocab_size=260, datastore=str(path), num_draft=3)
    assert drafter.capacity == 3
    drafter.reset([9, 1], None)
    full = drafter.propose(DraftContext([9, 1, 2], 2, budget=64, max_depth=10))
    assert len(full) == 3
    tight = drafter.propose(DraftContext([9, 1, 2], 2, budget=1, max_depth=10))
    assert tight.tokens.tolist() == [3]
    assert len(drafter.propose(DraftContext([9, 1, 2], 2, budget=64, max_depth=0))) == 0


def test_drafter_refuses_a_datastore_from_a_larger_vocabulary(tmp_path):
    store = make_store()
    store.meta["vocab_size"] = 50_000
    path = store.save(tmp_path / "ds.npz")
    with pytest.raises(ValueError, match="own tokenizer"):
        RestDrafter(vocab_size=260, datastore=str(path))
