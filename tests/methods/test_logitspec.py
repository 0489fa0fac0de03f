"""LogitSpec drafter and its n-gram index: pure tests, no model."""

from __future__ import annotations

import random

import pytest
import torch

from methods.common.ngram_index import NgramIndex
from methods.logitspec import LogitSpecDrafter, candidate_chains, length_for_rank
from racer_bench.engine.structs import DraftContext, Source
from racer_bench.engine.tree import node_depths
from tests.conftest import TINY_PROMPTS, ar_tokens, run_generate


def index_of(tokens: list[int], n: int = 3, pred: int = 20) -> NgramIndex:
    index = NgramIndex(n, pred)
    index.build(tokens)
    return index


# --- n-gram index -------------------------------------------------------------------------------


def test_build_stores_every_ngram_with_its_continuation():
    index = index_of([1, 2, 3, 4], n=2, pred=2)
    assert index.table == {
        (1,): (2, 3),
        (2,): (3, 4),
        (3,): (4,),
        (1, 2): (3, 4),
        (2, 3): (4,),
    }


def test_later_occurrence_wins_only_at_equal_length():
    # (1, 2) occurs at 0 and 4, both with a full 2-token continuation: the later one wins.
    assert index_of([1, 2, 3, 9, 1, 2, 4, 5, 6], pred=2).table[(1, 2)] == (4, 5)
    # A recent occurrence with a shorter continuation does not replace a full one yet.
    assert index_of([1, 2, 3, 9, 1, 2, 4], pred=2).table[(1, 2)] == (3, 9)


def test_lookup_prefers_the_longest_suffix():
    tokens = [7, 8, 9, 5, 1, 8, 9, 6, 2, 9, 4]
    index = index_of(tokens, pred=3)
    assert index.lookup([7, 8, 9]) == (5, 1, 8)  # trigram match
    assert index.lookup([0, 8, 9]) == (6, 2, 9)  # bigram (8, 9): latest full occurrence
    assert index.lookup([0, 0, 9]) == (6, 2, 9)  # unigram (9,): the short tail (4,) loses
    assert index_of([9, 5, 1, 9, 4], pred=3).lookup([9]) == (5, 1, 9)


def test_lookup_never_matches_itself():
    index = index_of([10, 11, 12, 13])
    assert index.lookup([10, 11, 12, 13]) == ()
    assert index.lookup([99]) == ()
    assert index.lookup([]) == ()


def test_lookup_with_extra_equals_lookup_of_extended_context():
    rng = random.Random(0)
    tokens = [rng.randrange(6) for _ in range(200)]
    index = index_of(tokens, pred=5)
    for _ in range(100):
        context = [rng.randrange(6) for _ in range(rng.randrange(0, 5))]
        extra = rng.randrange(7)
        assert index.lookup(context, extra) == index.lookup([*context, extra])


@pytest.mark.parametrize("max_chunk", [1, 5, 30])
def test_incremental_update_equals_full_rebuild(max_chunk):
    rng = random.Random(max_chunk)
    for n, pred in ((3, 4), (2, 1), (3, 20)):
        tokens = [rng.randrange(5) for _ in range(rng.randrange(0, 12))]
        index = index_of(tokens, n, pred)
        while len(tokens) < 150:
            chunk = [rng.randrange(5) for _ in range(rng.randint(1, max_chunk))]
            tokens += chunk
            index.extend(chunk)
            assert index.table == index_of(tokens, n, pred).table


# --- draft construction -------------------------------------------------------------------------


def test_rank_bands_use_the_raw_rank():
    bands = [length_for_rank(r, (8, 32), (4, 3, 1)) for r in (1, 8, 9, 32, 33, 63)]
    assert bands == [4, 4, 3, 3, 1, 1]


def ctx_for(tokens: list[int], topk: list[int], budget: int = 256, depth: int = 100):
    return DraftContext(tokens, tokens[-1], budget, depth, torch.tensor(topk))


def chains_of(draft) -> list[list[int]]:
    """Split a root + independent chains draft into its chains."""
    out: list[list[int]] = []
    for token, parent in zip(draft.tokens.tolist(), draft.parents.tolist(), strict=True):
        if parent < 0:
            out.append([token])
        else:
            out[-1].append(token)
    return out


def test_draft_is_root_plus_ranked_chains():
    # Context repeats "1 2 3 4 5 6 7" so every guess has a retrieved tail.
    context = [1, 2, 3, 4, 5, 6, 7] * 3 + [1, 2]
    drafter = LogitSpecDrafter(vocab_size=10, draft_tree_capacity=64)
    drafter.reset(context[:-1], None)
    topk = [2, 3, 5, 6]  # rank 0 is the root itself: skipped, yet it keeps its rank
    draft = drafter.propose(ctx_for(context, topk))
    chains = chains_of(draft)
    assert chains[0] == [3, 4, 5, 6, 7, 1, 2, 3, 4, 5, 6, 7, 1, 2]  # chain A, whole tail
    assert chains[1:] == [[3, 4, 5, 6], [5, 6, 7, 1], [6, 7, 1, 2]]
    assert set(draft.source[: len(chains[0])].tolist()) == {int(Source.RETRIEVAL)}
    heads = [i for i, p in enumerate(draft.parents.tolist()) if p < 0][1:]
    assert draft.source[heads].tolist() == [int(Source.NEXT_NEXT)] * 3
    assert draft.rank[heads].tolist() == [1, 2, 3]
    assert draft.meta["retrieval_found"] == 1.0 and draft.meta["next_token_found"] == 1.0


def test_capacity_counts_the_root_and_cuts_the_last_chain():
    context = [1, 2, 3, 4, 5, 6, 7, 8] * 4
    drafter = LogitSpecDrafter(vocab_size=64, draft_tree_capacity=10)
    assert drafter.capacity == 9
    drafter.reset(context, None)
    draft = drafter.propose(ctx_for(context, [8, 1, 2, 3, 4]))
    assert len(draft) == 9
    chains = chains_of(draft)
    assert [len(c) for c in chains] == [9]  # chain A fills the tree on its own
    drafter = LogitSpecDrafter(vocab_size=64, draft_tree_capacity=64, num_pred_tokens=2)
    drafter.reset(context, None)
    draft = drafter.propose(ctx_for(context, list(range(64))))
    assert len(draft) == 63  # plenty of guesses: the tree is filled exactly
    lengths = [len(c) for c in chains_of(draft)]
    assert lengths[0] == 2 and all(n <= 3 for n in lengths[1:])  # tails capped by num_pred


def test_rank_bands_truncate_chains():
    context = list(range(40)) * 2  # every token has a 20-token continuation
    drafter = LogitSpecDrafter(vocab_size=64, draft_tree_capacity=200)
    drafter.reset(context, None)
    topk = [context[-1], *range(39), 50, 51, 52]  # rank 0 is the root
    draft = drafter.propose(ctx_for(context, topk))
    heads = [i for i, p in enumerate(draft.parents.tolist()) if p < 0]
    ranks = draft.rank[heads].tolist()
    lengths = dict(zip(ranks, map(len, chains_of(draft)), strict=True))
    assert lengths[-1] == 20  # chain A is only capped by num_pred_tokens
    assert sorted(lengths) == [-1, *range(1, 43)]
    assert all(lengths[r] == 4 for r in range(1, 9))
    assert all(lengths[r] == 3 for r in range(9, 33))
    assert all(lengths[r] == 1 for r in range(33, 43))


def test_budget_and_depth_are_respected():
    context = list(range(30)) * 2
    drafter = LogitSpecDrafter(vocab_size=64)
    drafter.reset(context, None)
    draft = drafter.propose(ctx_for(context, list(range(64)), budget=7, depth=2))
    assert len(draft) == 7
    assert max(node_depths(draft.parents.tolist())) == 2
    assert len(drafter.propose(ctx_for(context, [1, 2], depth=0))) == 0


def test_without_retrieval_the_draft_is_one_token_per_guess():
    context = [5, 6, 7]  # nothing repeats, so no n-gram continues the root or a guess
    drafter = LogitSpecDrafter(vocab_size=64)
    drafter.reset(context, None)
    draft = drafter.propose(ctx_for(context, [7, 1, 2, 3]))
    assert draft.tokens.tolist() == [1, 2, 3]
    assert draft.parents.tolist() == [-1, -1, -1]
    assert draft.meta["retrieval_found"] == 0.0


def test_merge_prefixes_builds_a_trie():
    context = [1, 2, 3, 4, 5] * 3
    guesses = [5, 1, 1, 2]  # duplicate guess and chain A's own first token
    index = index_of(context)
    chains = list(candidate_chains(index, context, guesses, 20, (8, 32), (4, 3, 1)))
    assert [c.tokens[0] for c in chains] == [1, 1, 1, 2]
    for merge, expect_unique in ((False, False), (True, True)):
        drafter = LogitSpecDrafter(vocab_size=10, merge_prefixes=merge)
        drafter.reset(context, None)
        draft = drafter.propose(ctx_for(context, guesses))
        pairs = list(zip(draft.parents.tolist(), draft.tokens.tolist(), strict=True))
        assert (len(set(pairs)) == len(pairs)) == expect_unique


def test_update_keeps_the_index_in_step_with_committed_tokens():
    drafter = LogitSpecDrafter(vocab_size=10)
    drafter.reset([1, 2, 3], None)
    drafter.propose(ctx_for([1, 2, 3, 1], [1]))
    assert drafter.index.tokens == [1, 2, 3, 1]
    # A context that diverged from what the index saw forces a rebuild.
    drafter.propose(ctx_for([4, 4, 4], [4]))
    assert drafter.index.table == index_of([4, 4, 4]).table


@pytest.mark.parametrize("options", [{"merge_prefixes": True}, {"topk": 8, "num_pred_tokens": 5}])
def test_non_default_options_stay_lossless(tiny_target, options):
    drafter = LogitSpecDrafter(vocab_size=tiny_target.vocab_size, **options)
    prompt = list(TINY_PROMPTS[1])
    result = run_generate(tiny_target, drafter, prompt, max_new_tokens=32)
    assert result.tokens == ar_tokens(tiny_target, prompt, max_new_tokens=32)
    assert drafter.needs.topk == options.get("topk", 64)
