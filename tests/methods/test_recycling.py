"""Token Recycling drafter: template, adjacency update and breadth-first fill, no model."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from methods.recycling import (
    TEMPLATE_2_2_2,
    TokenRecyclingDrafter,
    TreeTemplate,
    fill_tree,
    informed_nodes,
    template_paths,
    update_adjacency,
)
from racer_bench.engine.structs import Draft, DraftContext, Feedback, Source
from racer_bench.engine.tree import node_depths
from tests.conftest import TINY_PROMPTS, ar_tokens, run_generate


def ctx_for(tokens: list[int], budget: int = 256, depth: int = 100, topk=None) -> DraftContext:
    return DraftContext(tokens, tokens[-1], budget, depth, topk)


# --- template -----------------------------------------------------------------------------------


def test_reference_template_shape():
    paths = list(TEMPLATE_2_2_2)
    assert len(paths) == len(set(paths)) == 80
    assert paths == sorted(paths, key=lambda p: (len(p), p))  # BFS order, as listed upstream
    depth_counts = Counter(len(p) for p in paths)
    assert [depth_counts[d] for d in range(1, 7)] == [8, 21, 25, 15, 8, 3]
    internal = {p[:-1] for p in paths}
    assert all(p[:-1] in internal for p in paths)  # closed under parents (root = ())
    assert sum(1 for p in paths if p not in internal) == 40  # leaves
    children = Counter(p[:-1] for p in paths)
    assert children[()] == 8 and children[(0,)] == 8 and children[(0, 0, 0)] == 5


def test_tree_template_arrays():
    template = TreeTemplate.from_paths(template_paths("2.2.2"))
    assert len(template) == 80
    assert template.layers[0] == (0, 8) and template.layers[-1] == (77, 80)
    depths = node_depths(template.parents.tolist())
    assert max(depths) == 6
    for i, (path, parent) in enumerate(zip(template_paths("2.2.2"), template.parents, strict=True)):
        assert template.columns[i] == path[-1]
        assert parent == -1 if len(path) == 1 else template_paths("2.2.2")[parent] == path[:-1]


@pytest.mark.parametrize(("name", "size", "depth"), [("bfs16", 16, 2), ("bfs32", 32, 3)])
def test_smaller_templates_keep_the_first_bfs_nodes(name, size, depth):
    paths = template_paths(name)
    assert paths == template_paths("2.2.2")[:size]
    assert all(len(p) == 1 or p[:-1] in paths for p in paths)
    assert max(map(len, paths)) == depth


@pytest.mark.parametrize("name", ["bfs0", "bfs81", "2.2", "bfsx"])
def test_unknown_templates_are_rejected(name):
    with pytest.raises(ValueError, match="template"):
        template_paths(name)


def test_out_of_order_paths_are_rejected():
    with pytest.raises(ValueError):
        TreeTemplate.from_paths([(0, 0), (0,)])


# --- fill and update ----------------------------------------------------------------------------


def test_fill_tree_on_a_hand_made_matrix():
    adj = np.array([[1, 2], [3, 4], [5, 6], [7, 8], [9, 0], [0, 0], [0, 0], [0, 0], [0, 0], [0, 0]])
    template = TreeTemplate.from_paths([(0,), (1,), (0, 0), (0, 1), (1, 1), (0, 1, 0)])
    # root 0 -> [1, 2]; 1 -> [3, 4]; 2 -> col 1 = 6; 4 -> col 0 = 9
    assert fill_tree(adj, 0, template).tolist() == [1, 2, 3, 4, 6, 9]


def test_fill_tree_matches_walking_each_path():
    rng = np.random.default_rng(0)
    adj = rng.integers(0, 50, size=(50, 8))
    paths = template_paths("2.2.2")
    tokens = fill_tree(adj, 7, TreeTemplate.from_paths(paths))
    for path, token in zip(paths, tokens.tolist(), strict=True):
        walked = 7
        for column in path:
            walked = adj[walked, column]
        assert token == walked


def test_update_overwrites_rows_and_last_duplicate_wins():
    adj = np.full((6, 2), -1, dtype=np.int64)
    tokens = np.array([3, 1, 3, 4])
    topk = np.array([[10, 11, 12], [20, 21, 22], [30, 31, 32], [40, 41, 42]])
    update_adjacency(adj, tokens, topk)
    assert adj[3].tolist() == [30, 31]  # second occurrence of 3 wins; width cut to k
    assert adj[1].tolist() == [20, 21] and adj[4].tolist() == [40, 41]
    assert adj[[0, 2, 5]].tolist() == [[-1, -1]] * 3  # rows of tokens not in the tree unchanged


# --- drafter ------------------------------------------------------------------------------------


def test_cold_matrix_proposes_the_full_template_of_zeros():
    drafter = TokenRecyclingDrafter(vocab_size=20)
    draft = drafter.propose(ctx_for([3, 4, 5]))
    assert len(draft) == drafter.capacity == 80
    assert draft.tokens.tolist() == [0] * 80
    assert set(draft.source.tolist()) == {int(Source.LOGITS)}
    assert draft.rank.tolist() == [p[-1] for p in template_paths("2.2.2")]


def test_update_learns_rows_for_root_and_every_node():
    drafter = TokenRecyclingDrafter(vocab_size=20, template="bfs16")
    draft = drafter.propose(ctx_for([3, 4, 19]))
    draft = Draft(draft.tokens + torch.arange(16), draft.parents)  # distinct tokens 0..15
    node_topk = torch.arange(17 * 8).reshape(17, 8) % 20
    drafter.update(Feedback(draft, accepted=[0], committed=[0, 7], node_topk=node_topk))
    assert drafter.adj[19].tolist() == node_topk[0].tolist()  # the root's row
    for i in range(16):  # accepted and rejected nodes alike
        assert drafter.adj[i].tolist() == node_topk[i + 1].tolist()
    assert drafter.propose(ctx_for([1, 19])).tokens[:8].tolist() == node_topk[0].tolist()


def test_first_draft_after_reset_writes_the_row_before_the_root():
    drafter = TokenRecyclingDrafter(vocab_size=20, template="bfs8")
    drafter.reset([1, 2, 3], None)
    topk = torch.arange(8) + 10  # target top-k after token 3 (rank 0 = the root, 10)
    drafter.propose(ctx_for([1, 2, 3, 10], topk=topk))
    assert drafter.adj[3].tolist() == topk.tolist()


@pytest.mark.parametrize("persist", [False, True])
def test_reset_clears_the_matrix_unless_persistent(persist):
    drafter = TokenRecyclingDrafter(vocab_size=20, persist_across_prompts=persist)
    drafter.adj[4] = 9
    drafter.reset([1, 2], None)
    assert drafter.adj[4].tolist() == ([9] * 8 if persist else [0] * 8)


def test_seed_from_prompt_fills_rows_from_prefill_topk():
    drafter = TokenRecyclingDrafter(vocab_size=20, seed_from_prompt=True)
    assert drafter.needs.prefill_topk
    prompt_topk = torch.arange(3 * 8).reshape(3, 8) % 20
    drafter.reset([4, 6, 4], prompt_topk)
    assert drafter.adj[4].tolist() == prompt_topk[2].tolist()
    assert drafter.adj[6].tolist() == prompt_topk[1].tolist()


def test_budget_and_depth_prune_the_template():
    drafter = TokenRecyclingDrafter(vocab_size=20)
    draft = drafter.propose(ctx_for([1, 2], budget=30, depth=2))
    assert len(draft) == 29  # all 8 + 21 nodes of depths 1 and 2
    assert max(node_depths(draft.parents.tolist())) == 2
    assert len(drafter.propose(ctx_for([1, 2], budget=5))) == 5


def test_topk_narrower_than_the_template_is_rejected():
    with pytest.raises(ValueError, match="topk"):
        TokenRecyclingDrafter(vocab_size=20, topk=4)
    assert TokenRecyclingDrafter(vocab_size=20, topk=4, template="bfs4").capacity == 4


@pytest.mark.parametrize(
    "options", [{"persist_across_prompts": True, "seed_from_prompt": True}, {"template": "bfs16"}]
)
def test_non_default_options_stay_lossless(tiny_target, options):
    drafter = TokenRecyclingDrafter(vocab_size=tiny_target.vocab_size, **options)
    for prompt_bytes in TINY_PROMPTS[:2]:
        prompt = list(prompt_bytes)
        result = run_generate(tiny_target, drafter, prompt, max_new_tokens=32)
        assert result.tokens == ar_tokens(tiny_target, prompt, max_new_tokens=32)
    assert drafter.adj.any()  # the matrix learned something


def test_skip_unwritten_drops_nodes_read_from_empty_rows():
    template = TreeTemplate.from_paths(template_paths("bfs16"))
    adj = np.zeros((10, 8), dtype=np.int64)
    adj[5] = [1, 2, 3, 4, 6, 7, 8, 9]
    adj[1] = [2, 3, 4, 6, 7, 8, 9, 5]
    written = np.zeros(10, dtype=bool)
    written[[5, 1]] = True
    tokens = fill_tree(adj, 5, template)
    keep = informed_nodes(tokens, 5, template, written)
    # depth 1 comes from the root's row; depth 2 only below token 1, whose row is written
    assert [tokens[i] for i in keep if template.parents[i] < 0] == adj[5].tolist()
    assert all(template.parents[i] < 0 or tokens[template.parents[i]] == 1 for i in keep)
    assert len(keep) == 8 + sum(1 for p in template.parents if p >= 0 and tokens[p] == 1)
    assert informed_nodes(tokens, 4, template, written) == []  # the root's row is empty

    drafter = TokenRecyclingDrafter(260, template="bfs16", skip_unwritten=True)
    drafter.reset([1, 2, 3], None)
    assert len(drafter.propose(ctx_for([1, 2, 3]))) == 0  # nothing written yet: no filler
    reference = TokenRecyclingDrafter(260, template="bfs16")
    reference.reset([1, 2, 3], None)
    assert reference.propose(ctx_for([1, 2, 3])).tokens.tolist() == [0] * 16


def test_skip_unwritten_stays_lossless(tiny_target):
    drafter = TokenRecyclingDrafter(tiny_target.vocab_size, skip_unwritten=True)
    prompt = list(TINY_PROMPTS[0])
    result = run_generate(tiny_target, drafter, prompt, max_new_tokens=32)
    assert result.tokens == ar_tokens(tiny_target, prompt, max_new_tokens=32)
