"""EAGLE-3 head: published-checkpoint mapping, TTT mask, KV consistency, tree isolation."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from methods.eagle3.checkpoint import load_eagle3, map_eagle3_state
from methods.eagle3.drafter import Eagle3Drafter, _TreeRun
from methods.eagle3.head import Eagle3Head, eagle3_config, ttt_mask
from racer_bench.engine.structs import DraftContext, Feedback
from racer_bench.errors import ConfigError
from tests.conftest import TINY_PROMPTS, ar_tokens, run_generate

H, V, VD = 16, 40, 12


def tiny_head(seed: int = 0) -> Eagle3Head:
    torch.manual_seed(seed)
    cfg = eagle3_config(H, 3 * H, V, num_heads=4, num_kv_heads=2, intermediate_size=32)
    head = Eagle3Head(cfg, torch.arange(VD) * 3)
    for p in head.parameters():
        torch.nn.init.normal_(p, std=0.3)
    return head.eval()


def published_folder(tmp_path, head: Eagle3Head):
    """A folder laid out like a published EAGLE-3 checkpoint (no embeddings, d2t offsets)."""
    folder = tmp_path / "eagle3"
    folder.mkdir()
    raw = {}
    for name, tensor in head.state_dict().items():
        if name in ("embed_tokens.weight", "draft_ids"):
            continue
        raw[name.replace("midlayer.", "model.layers.0.")] = tensor.clone()
    raw["d2t"] = head.draft_ids - torch.arange(VD)
    raw["t2d"] = torch.zeros(V, dtype=torch.bool)
    save_file(raw, str(folder / "model.safetensors"))
    cfg = {"hidden_size": H, "num_attention_heads": 4, "num_key_value_heads": 2,
           "intermediate_size": 32, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "vocab_size": V, "draft_vocab_size": VD}  # fmt: skip
    (folder / "config.json").write_text(json.dumps(cfg))
    target = tmp_path / "target"
    target.mkdir()
    save_file({"model.embed_tokens.weight": head.embed_tokens.weight.clone()},
              str(target / "model.safetensors"))  # fmt: skip
    return folder, target


def test_published_checkpoint_maps_onto_the_head(tmp_path) -> None:
    head = tiny_head()
    folder, target = published_folder(tmp_path, head)
    loaded = load_eagle3(str(folder), embed_from=str(target))
    ref = head.state_dict()
    for name, tensor in loaded.state_dict().items():
        assert torch.equal(tensor, ref[name]), name
    assert loaded.cfg["num_kv_heads"] == 2 and loaded.cfg["feature_size"] == 3 * H
    with pytest.raises(ConfigError, match=r"method\.embed_from"):
        load_eagle3(str(folder))


def test_state_mapping_handles_prefixes_and_d2t() -> None:
    raw = {"model.layers.0.self_attn.q_proj.weight": torch.ones(2), "fc.weight": torch.ones(1),
           "lm_head.weight": torch.ones(3, 2), "d2t": torch.tensor([0, 4, 4]),
           "t2d": torch.ones(9, dtype=torch.bool)}  # fmt: skip
    state = map_eagle3_state(raw)
    assert "midlayer.self_attn.q_proj.weight" in state and "t2d" not in state
    assert state["draft_ids"].tolist() == [0, 5, 6]


def test_ttt_mask_follows_the_drafting_pattern() -> None:
    assert torch.equal(ttt_mask(4, 0), torch.ones(4, 4, dtype=torch.bool).tril())
    mask = ttt_mask(5, 2)  # keys: step 0 | step 1 | step 2
    row = 4
    assert mask[row, :5].tolist() == [True, True, True, False, False]  # pairs <= 2
    assert mask[row, 5:10].tolist() == [False, False, False, True, False]  # step 1 at 3
    assert mask[row, 10:].tolist() == [False, False, False, False, True]  # itself
    assert mask.sum(1).min() >= 1


def test_incremental_kv_matches_one_pass() -> None:
    head = tiny_head()
    feats = torch.randn(9, 3 * H)
    tokens = torch.randint(0, V, (9,)).tolist()
    whole = Eagle3Drafter(V)
    whole.head = head
    whole._consume(feats, tokens)
    parts = Eagle3Drafter(V)
    parts.head = head
    parts._consume(feats[:5], tokens[:5])
    parts._consume(feats[5:], tokens[5:])
    assert torch.allclose(whole._last, parts._last, atol=1e-5)
    assert torch.allclose(whole._keys, parts._keys, atol=1e-5)


def test_tree_siblings_do_not_see_each_other() -> None:
    head = tiny_head()
    drafter = Eagle3Drafter(V)
    drafter.head = head
    drafter._consume(torch.randn(6, 3 * H), torch.randint(0, V, (6,)).tolist())
    tokens, parents = [1, 2, 5], [-1, -1, 0]
    both = _TreeRun(head, drafter._keys, drafter._values, drafter._last)
    together = both.expand([0, 1], 2, tokens, parents)
    alone = _TreeRun(head, drafter._keys, drafter._values, drafter._last)
    only_second = alone.expand([1], 2, tokens, parents)
    assert torch.allclose(together[1], only_second[0], atol=1e-5)
    deeper = both.expand([2], 3, tokens, parents)  # node 2 sees node 0, not node 1
    again = _TreeRun(head, drafter._keys, drafter._values, drafter._last)
    again.expand([0], 2, tokens, parents)
    assert torch.allclose(deeper, again.expand([2], 3, tokens, parents), atol=1e-5)


def test_update_pairs_accepted_features_with_committed_tokens() -> None:
    drafter = Eagle3Drafter(V)
    drafter.head = tiny_head()
    hidden = torch.randn(5, 3 * H)
    drafter.update(Feedback(None, [0, 2], [7, 8, 9], hidden=hidden))  # type: ignore[arg-type]
    assert torch.equal(drafter._pending, hidden[[0, 1, 3]])
    draft = drafter.propose(DraftContext([1, 2, 7, 8, 9], 9, 6, 6))
    assert len(draft) <= 6 and drafter._pending is None and len(drafter._keys) == 3


def test_eagle3_is_lossless_with_a_tree(tiny_target) -> None:
    drafter = Eagle3Drafter(260, depth=3, topk=3, total_tokens=9)
    assert drafter.needs.hidden_states and len(drafter.needs.hidden_layers) == 3
    prompt = list(TINY_PROMPTS[0])
    result = run_generate(tiny_target, drafter, prompt, max_new_tokens=30)
    assert result.tokens == ar_tokens(tiny_target, prompt, max_new_tokens=30)
    assert max(s.n_draft for s in result.steps) == 9
