"""Lookahead: window layout, Jacobi update, n-gram pool, verification-branch drafts."""

from __future__ import annotations

import random

import pytest
import torch

from methods.lookahead import (
    LookaheadDrafter,
    NgramPool,
    advance_window,
    guess_draft,
    init_window,
    window_aux,
    window_sizes,
)
from racer_bench.engine.structs import Draft, DraftContext, Feedback, Source
from racer_bench.engine.tree import node_depths, path_to

# A steady-state window for N = 4, W = 3: level 0 has W - 1 tokens, levels 1..N-2 have W.
STEADY = [[10, 11], [20, 21, 22], [30, 31, 32]]


def seen_by(aux, i: int) -> list[int]:
    """Aux indices token ``i`` attends to, in depth order."""
    cols = torch.nonzero(aux.mask[i]).flatten().tolist()
    return sorted(cols, key=lambda j: int(aux.depths[j]))


def test_window_aux_shape_depths_and_mask():
    aux = window_aux(STEADY)
    assert len(aux) == 2 + 3 + 3 == window_sizes(3, 4)[-1]
    assert aux.mask.shape == (8, 8)
    assert aux.tokens.tolist() == [10, 11, 20, 21, 22, 30, 31, 32]
    assert aux.depths.tolist() == [1, 2, 1, 2, 3, 2, 3, 4]
    assert bool(aux.mask.diagonal().all())
    assert seen_by(aux, 1) == [0, 1]  # level 0 is causal
    assert seen_by(aux, 2) == [2]  # level 1, column 0: root + itself
    assert seen_by(aux, 7) == [0, 1, 4, 7]  # level 2, column 2: 10 11 | 22 | 32
    for i in range(len(aux)):  # every token sees a chain of consecutive depths below itself
        depths = [int(aux.depths[j]) for j in seen_by(aux, i)]
        assert depths == list(range(1, int(aux.depths[i]) + 1))


def test_window_aux_rejects_ragged_levels():
    with pytest.raises(ValueError, match="3 tokens"):
        window_aux([[1, 2], [3, 4]])


def test_steady_update_harvests_one_ngram_per_column_and_shifts():
    argmax = [90, 91, 92, 93, 94, 80, 81, 82]  # after each aux token, window_aux order
    levels, harvest = advance_window(STEADY, argmax, root=5, level=4)
    # column c: key = root / level0[c-1], then levels 1..N-2 at c, then the new token
    assert harvest == [(5, (20, 30, 80)), (10, (21, 31, 81)), (11, (22, 32, 82))]
    assert levels == [[21, 22], [30, 31, 32], [80, 81, 82]]


def test_warmup_fills_one_level_per_step_until_steady():
    rng = random.Random(0)
    levels = init_window(list(range(100, 140)), window=3, level=4, rng=rng)
    assert [len(lv) for lv in levels] == [4]  # W + N - 3
    assert all(100 <= t < 140 for t in levels[0])
    sizes = []
    for step in range(3):
        aux = window_aux(levels)
        sizes.append(len(aux))
        argmax = [1000 * (step + 1) + i for i in range(len(aux))]
        levels, harvest = advance_window(levels, argmax, root=7, level=4)
        assert harvest == [] or step == 2
    assert sizes == window_sizes(3, 4) == [4, 3 + 4, 2 + 3 + 3]
    assert [len(lv) for lv in levels] == [2, 3, 3]
    assert len(harvest) == 3  # the first steady step harvests W n-grams


def test_warmup_predictions_become_the_next_level():
    levels = [[1, 2, 3]]
    levels, _ = advance_window(levels, [11, 12, 13], root=0, level=4)
    assert levels == [[2, 3], [11, 12, 13]]  # preds after level 0 tokens, all kept
    levels, _ = advance_window(levels, [0, 0, 21, 22, 23], root=0, level=4)
    assert levels == [[3], [12, 13], [22, 23]]  # every level drops its first column


def test_pool_is_lru_with_guess_set_size():
    pool = NgramPool(guess_set_size=2)
    pool.add(1, (2, 3))
    pool.add(1, (4, 5))
    pool.add(1, (2, 3))  # refresh: moves to the end
    pool.add(1, (6, 7))  # full: the oldest, (4, 5), goes
    assert pool.guesses(1) == [(2, 3), (6, 7)]
    assert pool.guesses(9) == []
    pool.add_sequence([1, 2, 3, 4], n=3)
    assert pool.guesses(2) == [(3, 4)]
    assert pool.guesses(1)[-1] == (2, 3)
    assert len(pool) == 3


def test_guess_draft_merges_shared_prefixes_and_respects_limits():
    guesses = [(1, 2, 3), (1, 2, 4), (5, 6, 7)]
    draft = guess_draft(guesses, budget=10, max_depth=10)
    assert len(draft) == 9 - 2  # the prefix (1, 2) is shared
    tokens, parents = draft.tokens.tolist(), draft.parents.tolist()
    paths = {tuple(tokens[j] for j in path_to(i, parents)) for i in range(len(draft))}
    assert {(1, 2, 3), (1, 2, 4), (5, 6, 7)} <= paths
    assert set(draft.source.tolist()) == {int(Source.RETRIEVAL)}
    assert len(guess_draft(guesses, budget=4, max_depth=10)) == 4
    assert max(node_depths(guess_draft(guesses, 10, max_depth=2).parents.tolist())) == 2


def feedback(draft: Draft, committed: list[int], fill: int) -> Feedback:
    argmax = torch.full((len(draft.aux),), fill, dtype=torch.long)
    return Feedback(draft, [], committed, None, argmax)


def test_drafter_drafts_only_after_warmup_from_the_root_key():
    drafter = LookaheadDrafter(vocab_size=260, level=3, window=2, guess_set_size=2, seed=1)
    assert drafter.capacity == 4
    assert drafter.aux_capacity == max(window_sizes(2, 3))
    prompt = [1, 2, 3, 4]
    drafter.reset(prompt, None)
    ctx = DraftContext([*prompt, 9], 9, budget=64, max_depth=8)
    first = drafter.propose(ctx)
    assert len(first) == 0 and len(first.aux) == window_sizes(2, 3)[0]
    drafter.update(feedback(first, [9], fill=9))  # warm-up over: the next step harvests
    second = drafter.propose(DraftContext([*prompt, 9, 9], 9, 64, 8))
    drafter.update(feedback(second, [9], fill=9))
    assert drafter.pool.guesses(9) == [(9, 9)]  # every column predicted 9 after 9
    third = drafter.propose(DraftContext([*prompt, 9, 9, 9], 9, 64, 8))
    assert third.tokens.tolist() == [9, 9]
    assert third.meta["retrieval_found"] == 1.0


def test_reset_reseeds_the_window():
    drafter = LookaheadDrafter(vocab_size=260, level=4, window=5, seed=3)
    drafter.reset(list(range(50)), None)
    first = [lv[:] for lv in drafter.levels]
    drafter.reset(list(range(50)), None)
    assert drafter.levels == first
    other = LookaheadDrafter(vocab_size=260, level=4, window=5, seed=4)
    other.reset(list(range(50)), None)
    assert other.levels != first


def test_pool_from_prompt_seeds_and_extends_the_pool():
    drafter = LookaheadDrafter(vocab_size=260, level=3, window=2, pool_from_prompt=True)
    drafter.reset([1, 2, 3, 1, 2, 4], None)
    assert drafter.pool.guesses(1) == [(2, 3), (2, 4)]
    draft = drafter.propose(DraftContext([1, 2, 3, 1, 2, 4, 7], 7, 64, 8))
    drafter.update(feedback(draft, [7, 8], fill=0))
    assert (7, 8) in drafter.pool.guesses(4)  # n-grams of the output: 4 7 8


def test_aux_logits_match_sequential_forwards(tiny_target):
    """Each window token's logits equal a plain forward over the chain it attends to."""
    prompt = list(b"def add(a, b):\n    return")
    root = 32
    levels = [[97, 98], [99, 100, 101], [102, 103, 104]]
    draft = guess_draft([(7, 8, 9)], 10, 10)
    draft.aux = window_aux(levels)
    tiny_target.prefill(prompt)
    out = tiny_target.forward_tree(root, draft)
    tokens = draft.aux.tokens.tolist()
    for i in range(len(tokens)):
        chain = [tokens[j] for j in seen_by(draft.aux, i)]
        expected = tiny_target.full_logits([*prompt, root, *chain])[-1]
        assert torch.allclose(out.aux_logits[i], expected, atol=1e-6)
    expected_nodes = tiny_target.full_logits([*prompt, root, 7, 8, 9])[-3:]
    assert torch.allclose(out.logits[1:], expected_nodes, atol=1e-6)


@pytest.mark.parametrize("persist", [False, True])
def test_pool_persists_across_prompts_only_when_asked(persist):
    drafter = LookaheadDrafter(
        260, level=3, window=2, pool_from_prompt=True, persist_across_prompts=persist
    )
    drafter.reset([1, 2, 3], None)
    drafter.reset([4, 5, 6], None)
    assert drafter.pool.guesses(4) == [(5, 6)]
    assert (drafter.pool.guesses(1) == [(2, 3)]) is persist
