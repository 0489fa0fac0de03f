"""Draft.score: each drafter's own per-node confidence feature (used only by the scheduler)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from methods.common.datastore import top_prefix_counts, top_prefixes
from methods.common.draft_tree import grow_scored_tree, grow_tree
from methods.logitspec import Chain, chain_score, independent_chains, merged_chains
from methods.lookahead import guess_draft
from methods.pld import PLDDrafter, find_match
from methods.recycling import TEMPLATE_2_2_2, TreeTemplate, path_scores, template_paths
from methods.rest import retrieve_draft
from methods.sps import SpSDrafter
from racer_bench.engine.structs import DraftContext, Source
from racer_bench.engine.tree import TrieBuilder, path_to, select_nodes
from racer_bench.models.loaders import tiny_random
from tests.methods.test_rest import make_store


def test_trie_builder_merges_scores() -> None:
    trie = TrieBuilder(8)
    trie.add_path([1, 2], Source.RETRIEVAL, score=2.0)
    trie.add_path([1, 3], Source.RETRIEVAL, score=5.0)
    trie.add_path([1, 2])  # no score: the stored ones stay
    draft = trie.build()
    assert draft.score.tolist() == [5.0, 2.0, 5.0]  # node 1 keeps the larger score
    counting = TrieBuilder(8, score_merge="sum")
    for path in ([1, 2], [1, 3], [1, 2, 4]):
        counting.add_path(path, score=1.0)
    assert counting.build().score.tolist() == [3.0, 2.0, 1.0, 1.0]
    assert TrieBuilder(4).build().score is None  # no scores at all: None, not NaNs
    unscored = TrieBuilder(4)
    unscored.add(-1, 7)
    assert unscored.build().score is None
    with pytest.raises(ValueError, match="score_merge"):
        TrieBuilder(4, score_merge="mean")


def test_partial_scores_are_nan_and_survive_selection() -> None:
    trie = TrieBuilder(8)
    trie.add(-1, 1, score=1.5)
    trie.add(0, 2)
    draft = trie.build()
    assert draft.score[0] == 1.5 and math.isnan(draft.score[1])
    assert select_nodes(draft, [0]).score.tolist() == [1.5]


def test_pld_scores_the_matched_suffix_length() -> None:
    tokens = np.array([1, 2, 3, 9, 1, 2, 3, 5, 6, 1, 2, 3])
    assert find_match(tokens, 3, 4) == ([9, 1, 2, 3], 3)
    assert find_match(np.array([4, 7, 8, 4]), 3, 2) == ([7, 8], 1)
    assert find_match(np.array([1, 2, 3]), 3, 2) == ([], 0)
    drafter = PLDDrafter(260, num_pred_tokens=4)
    drafter.reset(tokens.tolist(), None)
    draft = drafter.propose(DraftContext(tokens.tolist(), 3, 64, 64))
    assert draft.score.tolist() == [3.0] * 4


def test_rest_scores_the_share_of_continuations_through_a_node() -> None:
    conts = np.array([[3, 4], [3, 5], [6, -1], [3, 4]])
    counted = top_prefix_counts(conts, 5)
    assert [p for p, _ in counted] == top_prefixes(conts, 5)
    assert dict((tuple(p), c) for p, c in counted) == {(3,): 3, (3, 4): 2, (6,): 1, (3, 5): 1}
    draft = retrieve_draft(make_store(), [9, 1, 2], 64, 16, 2, 5000, 10)
    tokens, parents = draft.tokens.tolist(), draft.parents.tolist()
    scores = {tuple(tokens[j] for j in path_to(i, parents)): s
              for i, s in enumerate(draft.score.tolist())}  # fmt: skip
    assert scores == {(3,): 0.75, (3, 4): 0.5, (3, 5): 0.25, (6,): 0.25}


def test_logitspec_scores_say_which_guess_made_the_node() -> None:
    assert chain_score(-1) == 1.0 and chain_score(1) == 0.5 and chain_score(3) == 0.25
    chains = [Chain([5, 6], [1, 1]), Chain([7, 8], [4, 1], rank=1), Chain([5, 9], [4, 1], rank=3)]
    flat = independent_chains(iter(chains), 6)
    assert flat.score.tolist() == [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]
    merged = merged_chains(iter(chains), 6)
    assert merged.tokens.tolist() == [5, 6, 7, 8, 9]
    assert merged.score.tolist() == [1.0, 1.0, 0.5, 0.5, 0.25]  # the shared 5 keeps chain A's


def test_recycling_scores_fall_with_the_columns_on_the_path() -> None:
    template = TreeTemplate.from_paths(template_paths("2.2.2"))
    scores = path_scores(template)
    paths = sorted(TEMPLATE_2_2_2, key=lambda p: (len(p), p))
    for path, score in zip(paths, scores.tolist(), strict=True):
        assert score == pytest.approx(1.0 / (1.0 + sum(path)))


def test_lookahead_scores_count_the_pool_hits() -> None:
    draft = guess_draft([(1, 2, 3), (1, 2, 4), (5, 6, 7)], 64, 8)
    assert draft.tokens.tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert draft.score.tolist() == [2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0]


def test_model_drafters_score_their_probability() -> None:
    root = torch.tensor([0.0, -1.0, -2.0, -3.0]).log_softmax(-1)

    def expand(frontier, d, tokens, parents):
        return root.expand(len(frontier), 4)

    tokens, parents, local = grow_scored_tree(root, expand, depth=2, topk=2, budget=4)
    assert (tokens, parents) == grow_tree(root, expand, depth=2, topk=2, budget=4)
    assert local == pytest.approx([root[t].item() for t in tokens])  # own log-probability
    drafter = SpSDrafter(260, tiny_random(seed=1), num_tokens=3)
    prompt = list(b"the cat sat on the mat")
    drafter.reset(prompt, None)
    draft = drafter.propose(DraftContext(prompt, prompt[-1], 64, 64))
    assert len(draft.score) == 3 and all(0.0 < s <= 1.0 for s in draft.score.tolist())


def test_pld_min_ngram_size_skips_shorter_matches_as_vllm_ngram_does() -> None:
    tokens = np.array([4, 7, 8, 4])  # only a 1-gram recurs
    assert find_match(tokens, 3, 2, min_ngram_size=2) == ([], 0)
    tokens = np.array([5, 4, 7, 8, 5, 4])  # a 2-gram recurs
    assert find_match(tokens, 4, 5, min_ngram_size=2) == ([7, 8, 5, 4], 2)
    with pytest.raises(ValueError, match=r"method\.min_ngram_size=4"):
        PLDDrafter(260, max_ngram_size=3, min_ngram_size=4)
