"""SuffixDecoding drafter: local and global trees, eviction, drafts (no model needed)."""

from __future__ import annotations

import pytest
import torch

from methods.suffix import SuffixCache, SuffixDrafter
from racer_bench.engine.structs import Draft, DraftContext, Feedback, Source
from racer_bench.engine.tree import check_draft, node_depths


def ctx_of(tokens: list[int], budget: int = 64, max_depth: int = 64) -> DraftContext:
    return DraftContext(tokens=list(tokens), root=tokens[-1], budget=budget, max_depth=max_depth)


def feedback(committed: list[int]) -> Feedback:
    return Feedback(draft=Draft.empty(), accepted=[], committed=committed)


def test_draft_copies_the_prompt_continuation_as_retrieval():
    drafter = SuffixDrafter(vocab_size=100, max_spec_factor=2.0)
    prompt = [1, 2, 3, 4, 5, 6, 9, 1, 2]
    drafter.reset(prompt, None)
    draft = drafter.propose(ctx_of(prompt))
    check_draft(draft, budget=64)
    assert draft.tokens.tolist() == [3, 4, 5, 6]  # match "1 2" -> 2 * 2 tokens
    assert draft.parents.tolist() == [-1, 0, 1, 2]
    assert set(draft.source.tolist()) == {int(Source.RETRIEVAL)}
    # first node 1/2 (the current "1 2" is stored too), then certain inside the copied passage
    assert torch.allclose(draft.score, torch.tensor([0.5, 1.0, 1.0, 1.0]))
    assert draft.score_is_probability
    assert draft.meta == {"retrieval_found": 1.0, "match_len": 2.0, "global_draft": 0.0}


def test_budget_and_depth_are_respected():
    drafter = SuffixDrafter(vocab_size=100, max_spec_tokens=3, max_spec_factor=4.0)
    prompt = [1, 2, 3, 4, 5, 6, 9, 1, 2]
    drafter.reset(prompt, None)
    assert len(drafter.propose(ctx_of(prompt))) == 3
    assert len(drafter.propose(ctx_of(prompt, budget=2))) == 2
    shallow = drafter.propose(ctx_of(prompt, max_depth=1))
    assert max(node_depths(shallow.parents.tolist())) == 1
    assert len(drafter.propose(ctx_of(prompt, max_depth=0))) == 0


def test_global_tree_drafts_from_an_earlier_response():
    drafter = SuffixDrafter(vocab_size=100, max_spec_factor=2.0)
    drafter.reset([50, 51], None)
    drafter.update(feedback([7, 8, 9, 10, 11]))  # response of the first request
    drafter.reset([60, 61, 7, 8], None)
    draft = drafter.propose(ctx_of([60, 61, 7, 8]))
    assert draft.tokens.tolist() == [9, 10, 11]
    assert draft.meta["global_draft"] == 1.0
    fresh = SuffixDrafter(vocab_size=100, max_spec_factor=2.0, persist_across_prompts=False)
    fresh.reset([50, 51], None)
    fresh.update(feedback([7, 8, 9, 10, 11]))
    fresh.reset([60, 61, 7, 8], None)
    assert len(fresh.propose(ctx_of([60, 61, 7, 8]))) == 0


def test_prompts_never_enter_the_global_tree():
    drafter = SuffixDrafter(vocab_size=100)
    drafter.reset([7, 8, 9, 10], None)
    drafter.reset([3, 7, 8], None)
    assert len(drafter.propose(ctx_of([3, 7, 8]))) == 0


@pytest.mark.parametrize(("cap", "kept"), [(-1, [0, 1, 2]), (2, [1, 2]), (1, [2]), (0, [])])
def test_global_tree_evicts_first_in_first_out(cap, kept):
    cache = SuffixCache(max_depth=8, max_cached_requests=cap)
    for request in range(3):
        cache.start_request([99])
        cache.add_response([request, request + 10])
    if cap == 0:
        assert cache.global_tree is None
        return
    assert sorted(cache.global_tree.seqs) == kept
    assert cache.global_tree.count([0, 10]) == int(0 in kept)
    assert cache.global_tree.count([2, 12]) == 1  # the newest response is never evicted


def test_first_root_is_added_without_update_and_chain_mode_gives_a_chain():
    drafter = SuffixDrafter(vocab_size=100, max_spec_factor=3.0, use_tree_spec=False)
    drafter.reset([4, 5, 6, 4, 5, 7, 4], None)
    # the root 5 comes only through the context: "4 5" was followed by 6 and by 7
    draft = drafter.propose(ctx_of([4, 5, 6, 4, 5, 7, 4, 5]))
    assert draft.parents.tolist() == list(range(-1, len(draft) - 1))
    assert draft.tokens.tolist()[:1] in ([6], [7])
