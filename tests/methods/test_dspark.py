"""DSpark: Markov bias, acceptance scores, block drafting, training/inference agreement."""

from __future__ import annotations

import pytest
import torch

from methods.dspark.drafter import DSparkDrafter, _survival
from methods.dspark.head import (
    DSparkHead,
    acceptance_scores,
    block_outputs,
    dspark_config,
    dspark_loss,
    pass_last_feature,
)
from racer_bench.engine.structs import DraftContext
from racer_bench.engine.verify.sampling import SamplingVerifier
from tests.conftest import TINY_PROMPTS, ar_tokens, run_generate

H, F, V, G, R = 16, 48, 40, 5, 6
DRAFT_IDS = torch.arange(0, V, 2)  # a 20-token draft vocabulary


def tiny_head(gate: bool = True, seed: int = 0) -> DSparkHead:
    torch.manual_seed(seed)
    cfg = dspark_config(H, F, V, block_size=G, num_layers=2, num_heads=4, num_kv_heads=2,
                        intermediate_size=32, markov_rank=R, markov_gate=gate)  # fmt: skip
    head = DSparkHead(cfg, DRAFT_IDS)
    for p in head.parameters():
        torch.nn.init.normal_(p, std=0.3)
    return head.eval()


def test_markov_bias_shapes_and_dependence_on_the_previous_token() -> None:
    head = tiny_head()
    h = torch.randn(3, H)
    bias, m = head.markov(torch.tensor([1, 2, 1]), h)
    assert bias.shape == (3, len(DRAFT_IDS)) and m.shape == (3, R)
    assert not torch.allclose(bias[0], bias[1])  # previous token changes the bias
    same_h = head.markov(torch.tensor([1, 1]), h[[0, 0]])[0]
    assert torch.allclose(same_h[0], same_h[1])
    fresh = DSparkHead(head.cfg, DRAFT_IDS)  # untrained: zero bias, drafting = the backbone
    assert torch.equal(fresh.markov(torch.tensor([3]), h[:1])[0], torch.zeros(1, len(DRAFT_IDS)))
    ungated = tiny_head(gate=False)
    assert ungated.markov_gate is None
    low_rank = ungated.markov(torch.arange(V), torch.zeros(V, H))[0]
    assert torch.linalg.matrix_rank(low_rank) <= R


def test_acceptance_scores_give_the_argmax_the_confidence() -> None:
    logits = torch.randn(4, 7)
    conf = torch.tensor([0.9, 0.5, 0.1, 0.0])
    s = acceptance_scores(logits, conf)
    assert torch.allclose(s.sum(-1), torch.ones(4), atol=1e-5)
    top = logits.argmax(-1)
    assert torch.allclose(s[torch.arange(4), top], conf)
    p = logits.softmax(-1)
    for row in range(4):  # the rest keeps the drafter's order
        others = [v for v in range(7) if v != top[row]]
        assert torch.equal(s[row, others].argsort(), p[row, others].argsort())


def test_block_drafting_shapes_and_incremental_context() -> None:
    head = tiny_head()
    feats = torch.randn(9, F)
    last, whole = head.context(feats, torch.arange(9))
    parts = [
        head.context(feats[:4], torch.arange(4))[1],
        head.context(feats[4:], torch.arange(4, 9))[1],
    ]
    joined = [
        (torch.cat([a[0], b[0]]), torch.cat([a[1], b[1]])) for a, b in zip(*parts, strict=True)
    ]
    h = head.draft_block(7, last[-1], whole, 9, G)
    assert h.shape == (G, H) and head.base_logits(h).shape == (G, len(DRAFT_IDS))
    assert torch.allclose(h, head.draft_block(7, last[-1], joined, 9, G), atol=1e-5)
    assert head.draft_block(7, last[-1], whole, 9, 2).shape == (2, H)


def test_training_blocks_match_inference_blocks_and_never_see_the_future() -> None:
    head = tiny_head()
    n = 12
    feats, ids = torch.randn(n, F), torch.randint(0, V, (n,))
    labels = torch.full((n,), -100)
    labels[ids % 2 == 0] = ids[ids % 2 == 0] // 2  # draft index of even ids
    anchors = torch.tensor([3, 6, 10])
    out = block_outputs(head, feats, ids, labels, anchors)
    assert out["logits"].shape == (3, G, len(DRAFT_IDS)) and out["conf_logit"].shape == (3, G)
    assert out["inside"][2].tolist() == [True, False, False, False, False]  # 10 + 1 < 12 only
    for a, t in enumerate(anchors.tolist()):
        c, ctx = head.context(feats[:t], torch.arange(t))
        h = head.draft_block(int(ids[t]), c[-1], ctx, t, G)
        prev = torch.cat([ids[t : t + G], ids.new_zeros(G)])[:G].clamp_max(V - 1)
        bias, _ = head.markov(prev, h)
        inside = out["inside"][a]
        expected = (head.base_logits(h) + bias)[inside]
        assert torch.allclose(out["logits"][a][inside], expected, atol=1e-5)
    changed = feats.clone()
    changed[6:] += 5.0  # features at or after a root are not context for that block
    again = block_outputs(head, changed, ids, labels, anchors)
    assert torch.allclose(again["logits"][:2], out["logits"][:2], atol=1e-5)
    loss, parts = dspark_loss(head, feats, ids, labels, anchors)
    loss.backward()
    assert head.confidence.weight.grad is not None and head.fc.weight.grad is not None
    assert set(parts) == {"ce", "conf", "acc1"}


def test_drafter_scores_every_node_and_respects_depth(tiny_target) -> None:
    drafter = DSparkDrafter(260, block_size=4, topk=3, total_tokens=10)
    prompt = list(TINY_PROMPTS[1])
    result = run_generate(tiny_target, drafter, prompt, max_new_tokens=20)
    assert result.tokens == ar_tokens(tiny_target, prompt, max_new_tokens=20)
    drafter.reset(prompt, None)
    hidden = torch.randn(len(prompt), 3 * 64)
    draft = drafter.propose(DraftContext([*prompt, 5], 5, 10, 8, hidden=hidden))
    assert len(draft) == 10 and draft.score is not None and draft.q is None
    assert ((draft.score > 0) & (draft.score <= 1)).all()
    parents = draft.parents.tolist()
    depth = [0] * len(parents)
    for i, p in enumerate(parents):
        depth[i] = 1 if p < 0 else depth[p] + 1
    assert max(depth) <= 4
    survival = _survival(draft.score, parents)
    assert abs(draft.meta["predicted_accepted"] - float(survival.sum())) < 1e-5
    assert all(survival[i] <= survival[p] + 1e-7 for i, p in enumerate(parents) if p >= 0)
    shallow = drafter.propose(DraftContext([*prompt, 5, 6], 6, 10, 2))  # max_depth 2
    assert max(1 if p < 0 else 2 for p in shallow.parents.tolist()) <= 2


def test_sampled_tree_carries_draft_distributions(tiny_target) -> None:
    drafter = DSparkDrafter(260, block_size=3, topk=2, total_tokens=6, temperature=0.8)
    prompt = list(TINY_PROMPTS[0])
    drafter.reset(prompt, None)
    draft = drafter.propose(
        DraftContext([*prompt, 7], 7, 6, 5, hidden=torch.randn(len(prompt), 192))
    )
    assert len(draft) == 6 and draft.q is not None and draft.q.shape == (6, 260)
    assert torch.allclose(draft.q.sum(-1), torch.ones(6), atol=1e-5)
    assert draft.parents.tolist()[:2] == [-1, -1]  # two i.i.d. depth-1 samples, same row
    assert torch.equal(draft.q[0], draft.q[1])
    q = draft.q[torch.arange(6), draft.tokens]
    assert (q > 0).all()  # every token was drawn from its own row
    verifier = SamplingVerifier(temperature=0.8)
    for seed in range(3):  # runs end to end under sampling (distribution: integration test)
        result = run_generate(tiny_target, drafter, prompt, max_new_tokens=12,
                              verifier=verifier, seed=seed)  # fmt: skip
        assert len(result.tokens) == 12


def test_normed_block_inputs_keep_the_root_visible_and_version_1_heads_still_load() -> None:
    """With a target-like embedding (RMS ~0.13) the root must move row 0 about as much as the
    normed context vector does; a version-1 config (no ``block_input``) keeps the old sum."""
    torch.manual_seed(0)
    cfg = dspark_config(H, F, V, block_size=G, num_layers=1, num_heads=4, markov_rank=R)
    head = DSparkHead(cfg, DRAFT_IDS)
    head.embed_tokens.weight.data.normal_(0, 0.13)
    last = head.ctx_norm(head.fc(torch.randn(1, F)))[0]
    rows = head.block_inputs(torch.tensor([3, 4]), last[None].expand(2, -1), G)
    moved = (rows[0, 0] - rows[1, 0]).norm() / last.norm()
    assert moved > 0.5  # a raw embedding moves it by ~0.2 at these scales
    assert torch.equal(rows[0, 1:], rows[1, 1:])  # mask rows do not see the root
    old = {k: v for k, v in cfg.items() if k != "block_input"}
    legacy = DSparkHead(old, DRAFT_IDS)
    assert legacy.token_norm is None
    legacy.load_state_dict({k: v for k, v in head.state_dict().items() if "token_norm" not in k})
    x = legacy.block_inputs(torch.tensor([3]), last[None], G)
    expected = legacy.offset_embed[0] + last + legacy.embed_tokens.weight[3]
    assert torch.allclose(x[0, 0], expected)


def test_concat_block_inputs_start_as_the_normed_sum_and_learn_their_own_mix() -> None:
    """``block_input="concat"`` projects [token part; context vector]; its projection starts
    at [I, I], so an untrained head forms the same rows as ``"normed"``."""
    torch.manual_seed(0)
    cfg = dspark_config(H, F, V, block_size=G, num_layers=1, num_heads=4, markov_rank=R)
    normed = DSparkHead(cfg, DRAFT_IDS)
    concat = DSparkHead({**cfg, "block_input": "concat"}, DRAFT_IDS)
    concat.load_state_dict(normed.state_dict(), strict=False)
    last = torch.randn(2, H)
    roots = torch.tensor([3, 4])
    assert torch.allclose(concat.block_inputs(roots, last, G), normed.block_inputs(roots, last, G),
                          atol=1e-5)  # fmt: skip
    concat.in_proj.weight.data[:, :H] *= 2.0  # the token part now weighs twice the context
    rows = concat.block_inputs(roots, last, G)
    token = normed.block_inputs(roots, torch.zeros_like(last), G)
    assert torch.allclose(rows, 2 * token + last[:, None], atol=1e-5)
    with pytest.raises(ValueError, match="block_input"):
        dspark_config(H, F, V, block_input="mean")


def test_causal_head_trains_one_row_blocks_equal_to_row_0_of_its_drafting_block() -> None:
    """A causal head's row k reads rows 0..k only: drafting and training blocks agree, a
    one-row block equals row 0 of a full one, and root anchors add first-position examples."""
    torch.manual_seed(0)
    cfg = dspark_config(H, F, V, block_size=G, num_layers=2, num_heads=4, markov_rank=R,
                        causal=True)  # fmt: skip
    head = DSparkHead(cfg, DRAFT_IDS)
    n = 12
    feats, ids = torch.randn(n, F), torch.randint(0, V, (n,))
    labels = torch.where(ids % 2 == 0, ids // 2, torch.full_like(ids, -100))
    anchors = torch.tensor([3, 6])
    full = block_outputs(head, feats, ids, labels, anchors)
    solo = block_outputs(head, feats, ids, labels, anchors, size=1)
    assert torch.allclose(solo["logits"][:, 0], full["logits"][:, 0], atol=1e-5)
    c, ctx = head.context(feats[:6], torch.arange(6))
    h = head.draft_block(int(ids[6]), c[-1], ctx, 6, G)
    assert torch.allclose(head.draft_block(int(ids[6]), c[-1], ctx, 6, 2), h[:2], atol=1e-5)
    bias, _ = head.markov(ids[6 : 6 + G].clamp_max(V - 1), h)
    assert torch.allclose(full["logits"][1], head.base_logits(h) + bias, atol=1e-5)
    plain, _ = dspark_loss(head, feats, ids, labels, anchors)
    more, parts = dspark_loss(head, feats, ids, labels, anchors, root_anchors=torch.tensor([4, 8]))
    assert not torch.isclose(plain, more) and 0.0 <= parts["acc1"] <= 1.0
    bidirectional = DSparkHead({**cfg, "causal": False}, DRAFT_IDS)
    with pytest.raises(ValueError, match="causal"):
        dspark_loss(bidirectional, feats, ids, labels, anchors, root_anchors=torch.tensor([4]))


def test_pass_last_init_makes_an_untrained_block_read_the_last_feature_layer() -> None:
    """``pass_last_feature``: the context vector is the normed last feature slice and every
    layer is the identity, so row k's state is norm(input row k); training still moves it."""
    torch.manual_seed(0)
    cfg = dspark_config(H, F, V, block_size=G, num_layers=2, num_heads=4, markov_rank=R)
    head = DSparkHead(cfg, DRAFT_IDS)
    pass_last_feature(head)
    n = 9
    feats = torch.randn(n, F)
    c, ctx = head.context(feats, torch.arange(n))
    assert torch.allclose(c, head.ctx_norm(feats[:, -H:]), atol=1e-5)
    feats[:, : F - H] = torch.randn(n, F - H)  # the other layers do not matter yet
    assert torch.allclose(head.context(feats, torch.arange(n))[0], c, atol=1e-5)
    x = head.block_inputs(torch.tensor([3]), c[-1:], G)[0]
    assert torch.allclose(head.draft_block(3, c[-1], ctx, n, G), head.norm(x), atol=1e-5)
    ids = torch.randint(0, V, (n,))
    labels = torch.where(ids % 2 == 0, ids // 2, torch.full_like(ids, -100))
    loss, _ = dspark_loss(head, feats, ids, labels, torch.tensor([2, 5]))
    loss.backward()
    assert head.layers[0].down_proj.weight.grad.abs().sum() > 0
    assert head.layers[0].self_attn.o_proj.weight.grad.abs().sum() > 0
