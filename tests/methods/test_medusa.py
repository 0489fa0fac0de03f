"""Medusa heads, the shared dynamic tree, checkpoints and the drafter on the tiny model."""

from __future__ import annotations

import pytest
import torch

from methods.common.draft_tree import _best_indices, _reindex, grow_tree
from methods.common.heads.checkpoint import save_checkpoint
from methods.medusa import MedusaDrafter
from methods.medusa.head import MedusaHeads
from racer_bench.engine.structs import DraftContext, Feedback
from racer_bench.errors import ConfigError
from tests.conftest import TINY_PROMPTS, ar_tokens, run_generate


def best_nodes(
    tokens: list[int], parents: list[int], scores: list[float], budget: int
) -> tuple[list[int], list[int]]:
    """The ``budget`` best-scoring nodes whose ancestors are all kept, re-indexed: the selection
    :func:`methods.common.draft_tree.grow_scored_tree` ends with."""
    return _reindex(tokens, parents, _best_indices(parents, scores, budget))


def test_best_nodes_keeps_top_scores_with_their_ancestors() -> None:
    tokens = [10, 11, 12, 13, 14]
    parents = [-1, -1, 0, 2, 1]
    scores = [-0.1, -2.0, -0.5, -0.6, -2.1]
    got_tokens, got_parents = best_nodes(tokens, parents, scores, 3)
    assert got_tokens == [10, 12, 13] and got_parents == [-1, 0, 1]
    # A high-scoring node whose parent was not kept is skipped, never orphaned.
    got_tokens, got_parents = best_nodes(tokens, [-1, -1, 1, 2, 1], [-3, -5, -0.1, -0.2, -6], 2)
    assert got_parents[0] == -1 and all(-1 <= p < i for i, p in enumerate(got_parents))


def test_grow_tree_expands_the_best_frontier_and_respects_budget() -> None:
    vocab = 6
    root = torch.tensor([0.0, -1.0, -2.0, -3.0, -4.0, -5.0]).log_softmax(-1)
    calls: list[tuple[list[int], int]] = []

    def expand(frontier: list[int], d: int, tokens: list[int], parents: list[int]):
        calls.append((list(frontier), d))
        return root.expand(len(frontier), vocab)

    tokens, parents = grow_tree(root, expand, depth=3, topk=2, budget=5)
    assert [d for _, d in calls] == [2, 3]
    assert calls[0][0] == [0, 1]  # the root's two best children
    assert len(tokens) == 5 and all(-1 <= p < i for i, p in enumerate(parents))
    assert tokens[:2] == [0, 1] and parents[:2] == [-1, -1]
    assert grow_tree(root, expand, depth=0, topk=2, budget=5) == ([], [])


def test_untrained_heads_copy_the_lm_head() -> None:
    torch.manual_seed(0)
    heads = MedusaHeads(8, num_heads=3, num_layers=1, draft_ids=torch.arange(5))
    h = torch.randn(4, 8)
    out = heads(h)
    assert out.shape == (3, 4, 5)
    assert torch.allclose(out[2], heads.lm_head(h))


def test_checkpoint_roundtrip_and_missing_checkpoint(tmp_path) -> None:
    torch.manual_seed(0)
    heads = MedusaHeads(64, num_heads=2, num_layers=1, draft_ids=torch.tensor([3, 5, 7, 104]))
    torch.nn.init.normal_(heads.blocks[0][0].linear.weight)
    path = tmp_path / "medusa.pt"
    save_checkpoint(path, "medusa", {"hidden_size": 64, "num_heads": 2, "num_layers": 1}, heads)
    drafter = MedusaDrafter(260, checkpoint=str(path))
    assert drafter.head is not None
    assert torch.equal(drafter.head.blocks[0][0].linear.weight, heads.blocks[0][0].linear.weight)
    drafter.reset([1, 2], None)
    ctx = DraftContext([1, 2, 3], 3, 64, 64, hidden=torch.randn(3, 64, dtype=torch.float64))
    draft = drafter.propose(ctx)
    assert set(draft.tokens.tolist()) <= {3, 5, 7, 104}  # draft ids mapped to target ids
    assert max(len(draft), 1) <= drafter.capacity
    with pytest.raises(ConfigError, match=r"method\.checkpoint=.*kind=medusa"):
        MedusaDrafter(260, checkpoint=str(tmp_path / "missing.pt"))


def test_update_keeps_the_hidden_state_of_the_last_accepted_node() -> None:
    drafter = MedusaDrafter(260)
    hidden = torch.arange(4 * 2, dtype=torch.float64).view(4, 2)
    draft = drafter.propose(DraftContext([1], 1, 8, 8))
    assert len(draft) == 0  # nothing seen yet: no draft
    drafter.update(Feedback(draft, [0, 1], [5, 6, 7], hidden=hidden))
    assert torch.equal(drafter._pending[-1], hidden[2])
    drafter.update(Feedback(draft, [], [5], hidden=hidden))
    assert torch.equal(drafter._pending[-1], hidden[0])


def test_medusa_is_lossless_with_a_tree(tiny_target) -> None:
    drafter = MedusaDrafter(260, topk=3, total_tokens=10)
    prompt = list(TINY_PROMPTS[1])
    result = run_generate(tiny_target, drafter, prompt, max_new_tokens=30)
    assert result.tokens == ar_tokens(tiny_target, prompt, max_new_tokens=30)
    assert max(s.n_draft for s in result.steps) == 10
    assert max(s.depth for s in result.steps) <= 4
