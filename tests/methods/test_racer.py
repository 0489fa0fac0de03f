"""RACER drafter: TokenBin, breadth halving, merge, ranks, update rules, ablation switches."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from methods.racer import RacerDrafter
from methods.racer.logits_tree import TokenBin, child_breadth, grow_logits_tree
from racer_bench.engine.structs import Draft, DraftContext, Feedback, Source
from racer_bench.engine.tree import TrieBuilder, node_depths
from tests.conftest import TINY_PROMPTS, ar_tokens, run_generate

K_ARY_VOCAB = 1 << 20


def k_ary_bin(k: int, vocab: int = 4096) -> TokenBin:
    """Row ``t`` = ``k*t+1 .. k*t+k``: every node of a k-ary tree gets distinct children."""
    tokens = np.arange(vocab)
    rows = k * tokens[:, None] + np.arange(1, k + 1)[None, :]
    token_bin = TokenBin(K_ARY_VOCAB, k)
    token_bin.update(tokens, rows)
    return token_bin


def leaf_paths(builder: TrieBuilder, root: int) -> set[tuple[int, ...]]:
    parents = builder.parents
    inner = set(parents)
    paths = set()
    for leaf in range(len(parents)):
        if leaf in inner:
            continue
        path, node = [], leaf
        while node >= 0:
            path.append(builder.tokens[node])
            node = parents[node]
        paths.add((root, *path[::-1]))
    return paths


def test_token_bin_last_write_wins_and_unseen_rows_are_none():
    token_bin = TokenBin(vocab_size=10, width=3)
    rows = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9], [0, 0, 0]])
    token_bin.update(np.array([5, 7, 5, 42]), rows)
    assert token_bin.row(5) == [7, 8, 9]
    assert token_bin.row(7) == [4, 5, 6]
    assert token_bin.row(6) is None
    assert token_bin.row(42) is None  # outside the vocabulary: ignored
    token_bin.update(np.array([7]), np.array([[9, 9, 9, 1]]))  # extra columns are dropped
    assert token_bin.row(7) == [9, 9, 9]
    token_bin.clear()
    assert token_bin.row(5) is None


def test_child_breadth_halves_per_sibling_rank():
    assert [child_breadth(8, j, 0) for j in range(8)] == [4, 2, 1, 1, 1, 1, 1, 1]
    assert [child_breadth(4, j, 1) for j in range(4)] == [4, 2, 1, 1]
    assert [child_breadth(4, j, 2) for j in range(4)] == [2, 1, 1, 1]
    assert [child_breadth(4, j, 0, "paper") for j in range(4)] == [4, 2, 1, 1]
    assert [child_breadth(4, j, 1, "paper") for j in range(4)] == [2, 1, 1, 1]


def test_logits_only_tree_matches_reference_depth_profile():
    builder = TrieBuilder(63)  # the reference's 64 nodes include the root
    added = grow_logits_tree(builder, 0, k_ary_bin(8).row, 63, 16, 8)
    assert added == 63
    per_depth = Counter(node_depths(builder.parents))
    assert [per_depth[d] for d in range(1, 6)] == [8, 12, 17, 18, 8]
    assert set(builder.sources) == {int(Source.LOGITS)}


def test_paper_halving_reproduces_figure_9():
    builder = TrieBuilder(20)  # 21 nodes with the root
    grow_logits_tree(builder, 0, k_ary_bin(4).row, 20, 16, 4, halving="paper")
    assert leaf_paths(builder, 0) == {
        (0, 4, 17),
        (0, 1, 5, 21),
        (0, 1, 5, 22),
        (0, 1, 6, 25),
        (0, 1, 7, 29),
        (0, 1, 8, 33),
        (0, 2, 9, 37),
        (0, 2, 10, 41),
        (0, 3, 13, 53),
    }


def test_logits_tree_respects_budget_and_depth():
    for budget in (1, 2, 9, 40):
        builder = TrieBuilder(64)
        assert grow_logits_tree(builder, 0, k_ary_bin(8).row, budget, 16, 8) == budget
        assert len(builder) == budget
    builder = TrieBuilder(64)
    grow_logits_tree(builder, 0, k_ary_bin(8).row, 64, 2, 8)
    assert max(node_depths(builder.parents)) == 2
    assert len(builder) == 8 + 12


def test_merge_reuses_retrieval_nodes_for_free_and_records_ranks():
    token_bin = TokenBin(vocab_size=100, width=4)
    token_bin.update(np.array([1, 2, 3]), np.array([[2, 5, 6, 7], [3, 8, 9, 10], [11, 12, 13, 14]]))
    builder = TrieBuilder(9)
    builder.add_path([2, 3], Source.RETRIEVAL)  # retrieval already proposed root -> 2 -> 3
    added = grow_logits_tree(builder, 1, token_bin.row, 7, 8, 4)
    assert added == 6 and len(builder) == 8  # 5, 6, 7, 8 have no row: they stay leaves
    pairs = list(zip(builder.parents, builder.tokens, strict=True))
    assert len(set(pairs)) == len(pairs)  # no duplicate child anywhere
    draft = builder.build()
    by_token = {t: i for i, t in enumerate(draft.tokens.tolist())}
    assert draft.source[by_token[2]] == Source.RETRIEVAL and draft.rank[by_token[2]] == -1
    assert draft.rank[by_token[5]] == 1 and draft.source[by_token[5]] == Source.LOGITS
    assert draft.parents[by_token[8]] == by_token[2] and draft.rank[by_token[8]] == 1
    assert draft.parents[by_token[11]] == by_token[3]  # continues below the retrieval leaf
    assert draft.rank[by_token[11]] == 0 and draft.rank[by_token[12]] == 1


def test_skip_self_drops_the_token_but_keeps_raw_ranks():
    token_bin = TokenBin(vocab_size=100, width=4)
    token_bin.update(np.array([1]), np.array([[1, 20, 21, 22]]))
    builder = TrieBuilder(8)
    grow_logits_tree(builder, 1, token_bin.row, 3, 1, 3, skip_self=True)
    assert builder.tokens == [20, 21, 22]
    assert builder.ranks == [1, 2, 3]


# ----------------------------------------------------------------- the drafter, model-free
PROMPT = [9, 1, 2, 3, 4, 8, 1, 2, 3, 4, 7, 1, 2, 3, 6, 5, 1]


def ctx_for(tokens: list[int], budget: int = 64, max_depth: int = 64, root_topk=None):
    return DraftContext(list(tokens), tokens[-1], budget, max_depth, root_topk)


def test_retrieval_tree_keeps_the_most_frequent_continuations():
    drafter = RacerDrafter(vocab_size=50, ngram=4, logits=False, selection="reference")
    drafter.reset(PROMPT, None)
    draft = drafter.propose(ctx_for([*PROMPT, 2]))  # "... 1" + root 2 matches "1 2"
    assert draft.tokens.tolist() == [3, 4, 6]
    assert draft.parents.tolist() == [-1, 0, 0]
    assert set(draft.source.tolist()) == {int(Source.RETRIEVAL)}
    assert draft.rank.tolist() == [-1, -1, -1]
    assert draft.meta["retrieval_found"] == 1.0 and draft.meta["borders"] == 1.0
    small = drafter.propose(ctx_for([*PROMPT, 2], budget=2))
    assert small.tokens.tolist() == [3, 4]  # "1 2 3 4" (twice) beats "1 2 3 6" (once)
    assert len(drafter.propose(ctx_for([*PROMPT, 2], max_depth=1))) == 1
    miss = drafter.propose(ctx_for([*PROMPT, 40]))
    assert len(miss) == 0 and miss.meta["retrieval_found"] == 0.0


def test_lazy_links_match_only_after_the_state_has_moved():
    drafter = RacerDrafter(
        vocab_size=50, ngram=4, logits=False, fail_links="lazy", selection="reference"
    )
    drafter.reset(PROMPT, None)
    ctx = ctx_for([*PROMPT, 2])
    assert len(drafter.propose(ctx)) == 0  # the reference never moves the state over the prompt
    drafter.update(Feedback(Draft.empty(), [], [3]))  # root 2 consumed, bonus 3
    draft = drafter.propose(ctx_for([*PROMPT, 2, 3]))  # state "2" + root 3 = "2 3"
    assert draft.tokens.tolist() == [4, 6, 8, 7, 5]  # "2 3 4 8", "2 3 4 7", "2 3 6 5"


def test_update_inserts_windows_up_to_the_new_root():
    drafter = RacerDrafter(vocab_size=50, ngram=4, logits=False)
    drafter.reset([1, 2, 3], None)
    assert len(drafter.automaton) == 1  # no full window yet
    ctx = ctx_for([1, 2, 3, 4])
    drafter.propose(ctx)
    drafter.update(Feedback(Draft.chain([5]), [0], [5, 6]))
    automaton = drafter.automaton
    assert automaton.walk([1, 2, 3, 4]) is not None  # ends at the old root
    assert automaton.walk([2, 3, 4, 5]) is not None  # ends at the accepted token
    assert automaton.walk([3, 4, 5, 6]) is None  # the new root waits for the next step


def step_feedback(tokens, parents, accepted, bonus, k=3):
    """Feedback whose node_topk row r is [100r, 100r+1, ...] so rows are recognisable."""
    draft = Draft(torch.tensor(tokens), torch.tensor(parents))
    topk = torch.arange(len(tokens) + 1)[:, None] * 100 + torch.arange(k)[None, :]
    committed = [tokens[i] for i in accepted] + [bonus]
    return Feedback(draft, accepted, committed, topk)


def test_copy_rows_come_from_every_verified_node_accepted_first():
    drafter = RacerDrafter(vocab_size=50, retrieval=False, max_breadth=3)
    drafter.reset([7, 8], torch.tensor([[1, 2, 3], [4, 5, 6]]))
    assert drafter.token_bin.row(8) == [4, 5, 6]
    drafter.propose(ctx_for([7, 8, 9]))
    # nodes: 10 (acc) -> 11 (acc) -> 10 (rejected), and 12 (rejected) under the root
    drafter.update(step_feedback([10, 11, 10, 12], [-1, 0, 1, -1], [0, 1], bonus=13))
    assert drafter.token_bin.row(9) == [0, 1, 2]  # the root: row 0
    assert drafter.token_bin.row(10) == [100, 101, 102]  # accepted occurrence wins
    assert drafter.token_bin.row(11) == [200, 201, 202]
    assert drafter.token_bin.row(12) == [400, 401, 402]  # rejected nodes are recorded too
    assert drafter.token_bin.row(13) is None  # the bonus has no logits after it yet


def test_last_rows_come_from_the_logits_that_predicted_each_token():
    drafter = RacerDrafter(vocab_size=50, retrieval=False, max_breadth=2, logit_source="last")
    assert drafter.needs.topk == 3
    drafter.reset([7, 8], torch.tensor([[1, 2, 3], [4, 5, 6]]))
    assert drafter.token_bin.row(8) == [1, 2, 3] and drafter.token_bin.row(7) is None
    draft = drafter.propose(ctx_for([7, 8, 9], root_topk=torch.tensor([9, 20, 21])))
    assert draft.tokens.tolist()[:2] == [20, 21]  # root_topk without the root itself
    assert draft.rank.tolist()[:2] == [1, 2]
    drafter.update(step_feedback([10, 11, 12], [-1, 0, -1], [0, 1], bonus=13))
    assert drafter.token_bin.row(10) == [0, 1, 2]  # predicted by the root's logits
    assert drafter.token_bin.row(11) == [100, 101, 102]
    assert drafter.token_bin.row(12) == [0, 1, 2]
    assert drafter.token_bin.row(13) == [200, 201, 202]  # the bonus: logits after node 1


def test_full_drafter_merges_retrieval_then_logits_within_capacity():
    drafter = RacerDrafter(vocab_size=4096, ngram=4, capacity=20, selection="reference")
    drafter.reset(PROMPT, torch.zeros(len(PROMPT), 8, dtype=torch.long))
    tokens = np.arange(4096)
    drafter.token_bin.update(tokens, (8 * tokens[:, None] + np.arange(1, 9)) % 4096)
    drafter.token_bin.update(np.array([2]), np.array([[3, 30, 31, 32, 33, 34, 35, 36]]))
    draft = drafter.propose(ctx_for([*PROMPT, 2]))
    assert len(draft) == 20
    sources = draft.source.tolist()
    assert sources[:3] == [int(Source.RETRIEVAL)] * 3  # retrieval first
    assert draft.meta["logits_nodes"] == 17.0
    assert draft.tokens.tolist().count(3) == 1  # the logits root row repeats retrieval's 3
    pairs = list(zip(draft.parents.tolist(), draft.tokens.tolist(), strict=True))
    assert len(set(pairs)) == len(pairs)
    ranks = draft.rank.tolist()
    assert all((r == -1) == (s == Source.RETRIEVAL) for r, s in zip(ranks, sources, strict=True))
    assert len(drafter.propose(ctx_for([*PROMPT, 2], budget=5))) == 5


def test_persist_across_prompts_keeps_the_index():
    for persist in (False, True):
        drafter = RacerDrafter(vocab_size=50, ngram=4, persist_across_prompts=persist)
        drafter.reset(PROMPT, torch.zeros(len(PROMPT), 8, dtype=torch.long))
        drafter.reset([30, 31], torch.zeros(2, 8, dtype=torch.long))
        assert (drafter.automaton.walk([1, 2, 3, 4]) is not None) == persist
        assert (drafter.token_bin.row(9) is not None) == persist
        assert drafter.persist_across_prompts == persist


def test_ablation_switches_set_needs_and_sources():
    assert RacerDrafter(vocab_size=50).needs.topk == 8
    assert RacerDrafter(vocab_size=50).needs.prefill_topk
    off = RacerDrafter(vocab_size=50, logits=False)
    assert off.needs.topk == 0 and off.token_bin is None
    assert RacerDrafter(vocab_size=50, retrieval=False).automaton is None
    unbounded = RacerDrafter(vocab_size=50, lru=False, max_nodes=3)
    assert not unbounded.automaton.lru
    for bad in (
        {"logit_source": "first"},
        {"fail_links": "eager"},
        {"halving": "third"},
        {"max_nodes": 5},
        {"max_breadth": 0},
    ):
        with pytest.raises(ValueError):
            RacerDrafter(vocab_size=50, **bad)


@pytest.fixture(scope="module")
def ar_outputs(tiny_target) -> list[tuple[list[int], list[int]]]:
    prompts = [list(p) for p in TINY_PROMPTS[:2]]
    return [(p, ar_tokens(tiny_target, p, max_new_tokens=24)) for p in prompts]


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"logit_source": "last", "retrieval": False},
        {"logits": False, "ngram": 3, "max_nodes": 16},
        {
            "lru": False,
            "halving": "paper",
            "persist_across_prompts": True,
            "selection": "reference",
        },
        {"lru": False, "persist_across_prompts": True},
        {"selection": "reference", "fail_links": "lazy", "logit_source": "last"},
        {"fail_links": "lazy", "extend_windows": False, "retrieval_alpha": 2.0},
    ],
)
def test_variants_are_lossless_on_the_tiny_model(overrides, tiny_target, ar_outputs):
    drafter = RacerDrafter(vocab_size=tiny_target.vocab_size, capacity=24, **overrides)
    for prompt, expected in ar_outputs:
        result = run_generate(tiny_target, drafter, prompt, max_new_tokens=24)
        assert result.tokens == expected
        assert all(s.n_draft <= 24 for s in result.steps)
