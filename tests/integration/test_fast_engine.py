"""The fast engine: same answers as a fresh full forward and as the eager engine, lossless."""

from __future__ import annotations

import pytest
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from racer_bench.engine.fast import attention, bf16_gemm, kernel_library, small_gemm
from racer_bench.engine.structs import Draft
from racer_bench.engine.target import HFTarget
from racer_bench.errors import ConfigError
from racer_bench.models.loaders import tiny_random
from tests.conftest import TINY_PROMPTS, ar_tokens, run_generate

# root -> 10 -> 11 -> 12 ; root -> 20 -> 21 ; 10 -> 30
TREE = Draft(torch.tensor([10, 20, 11, 21, 12, 30]), torch.tensor([-1, -1, 0, 1, 2, 0]))
PATHS = [(4, [10, 11, 12]), (3, [20, 21]), (5, [10, 30])]


def fast_target(**kwargs) -> HFTarget:
    target = tiny_random(num_kv_heads=2, **kwargs)
    assert target.set_engine("fast") == "fast"
    return target


class Module(torch.nn.Module):
    num_key_value_groups = 3


def test_grouped_sdpa_equals_repeat_kv_sdpa() -> None:
    gen = torch.Generator().manual_seed(0)
    query = torch.randn(1, 6, 5, 8, generator=gen).transpose(1, 2).contiguous().transpose(1, 2)
    key, value = torch.randn(1, 2, 12, 8, generator=gen), torch.randn(1, 2, 12, 8, generator=gen)
    allowed = torch.rand(5, 12, generator=gen) > 0.3
    allowed[:, 0] = True
    mask = torch.zeros(1, 1, 5, 12).masked_fill(~allowed, torch.finfo(torch.float32).min)
    module = Module().eval()
    got, _ = attention.grouped_sdpa(module, query, key, value, mask, scaling=0.3)
    want, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=0.3)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "atol"),
    [({}, 1e-9), ({"dtype": "float32"}, 1e-4), ({"architecture": "gemma3", "num_layers": 4}, 1e-9)],
    ids=["llama-float64", "llama-float32-packed", "gemma3-sliding"],
)
def test_tree_forward_and_commit_match_full_forward(kwargs, atol) -> None:
    """After prefixes longer than Gemma's 8-token window, several tree steps and commits."""
    target = fast_target(**kwargs)
    prompt = list(b"equivalence check prompt, long enough for the window")
    target.prefill(prompt[:-1])
    committed = list(prompt)
    for step in range(3):
        past = target.length
        out = target.forward_tree(committed[-1], TREE)
        for node, path in PATHS:
            full = target.full_logits(committed + path)[-1]
            torch.testing.assert_close(out.logits[node + 1], full, rtol=0, atol=atol)
        target.commit(past, [1, 3])  # accept 20 -> 21; the next root is a new token
        committed += [20, 21, 40 + step]
        assert target.length == len(committed) - 1
    nxt = target.forward_tree(committed[-1], Draft.chain([5, 6])).logits
    full = target.full_logits([*committed, 5, 6])[-1]
    torch.testing.assert_close(nxt[2], full, rtol=0, atol=atol)


@pytest.mark.skipif(kernel_library.unavailable_reason() is not None, reason="no small GEMM kernel")
def test_float32_linears_are_packed() -> None:
    target = fast_target(dtype="float32")
    assert target.engine_details["small_gemm"] == "on"
    assert target.engine_details["fused_groups"] == 2 * 2  # q/k/v and gate/up per layer
    assert target.engine_details["packed_linears"] == 2 * 2 + 1  # o, down per layer; head
    assert isinstance(target.head, small_gemm.PackedLinear)
    # the manifest names the bfloat16 kernel this machine uses and why AMX is or is not on
    assert target.engine_details["bf16_gemm"] == bf16_gemm.bf16_kernel()
    amx = target.engine_details["amx"]
    assert amx == "on" if target.engine_details["bf16_gemm"] == "amx" else amx != "on"


@pytest.mark.parametrize("method", ["pld", "racer", "logitspec", "recycling", "lookahead"])
def test_methods_stay_lossless_on_the_packed_float32_engine(method, compose_cfg) -> None:
    from hydra.utils import instantiate

    from racer_bench.config.construct import constructor_node

    target = fast_target(dtype="float32")
    cfg = compose_cfg(f"method={method}", "model=tiny_random")
    drafter = instantiate(constructor_node(cfg.method))(vocab_size=target.vocab_size)
    accepted = 0
    for prompt_bytes in TINY_PROMPTS:
        prompt = list(prompt_bytes)
        result = run_generate(target, drafter, prompt, max_new_tokens=40)
        assert result.tokens == ar_tokens(target, prompt, max_new_tokens=40)
        accepted += sum(step.n_accepted for step in result.steps)
    assert accepted > 0  # the drafts were really verified, not all rejected


def test_fast_and_eager_engines_agree() -> None:
    eager, fast = tiny_random(num_kv_heads=2), fast_target()
    for prompt_bytes in TINY_PROMPTS:
        prompt = list(prompt_bytes)
        assert ar_tokens(fast, prompt) == ar_tokens(eager, prompt)


def test_engine_names_are_checked() -> None:
    target = tiny_random()
    with pytest.raises(ConfigError, match="engine=turbo: allowed values are auto, eager, fast"):
        target.set_engine("turbo")
    assert target.set_engine("auto") == "fast"  # a CPU target
    with pytest.raises(ConfigError, match="already runs the fast engine"):
        target.set_engine("eager")


@pytest.mark.skipif(kernel_library.unavailable_reason() is not None, reason="no small GEMM kernel")
@pytest.mark.parametrize(("dtype", "atol"), [("float32", 1e-4), ("bfloat16", 0.1)])
def test_the_layer_stack_follows_transformers_modules(dtype, atol) -> None:
    """The one-call layers give a tree step the logits transformers' modules give it, within
    the dtype's rounding (they round in the same places, in another order)."""
    target = fast_target(dtype=dtype, init_std=0.05)
    assert target.engine_details["layer_stack"] == "on"
    prompt = list(b"the layer stack against transformers' own modules")
    got = []
    for native in (target.layer_stack, None):
        target.layer_stack = native
        target.prefill(prompt[:-1])
        got.append(target.forward_tree(prompt[-1], TREE).logits)
    torch.testing.assert_close(got[0], got[1], rtol=0, atol=atol)
    assert torch.equal(got[0].argmax(-1), got[1].argmax(-1))


def test_the_layer_stack_is_off_where_unsupported(monkeypatch) -> None:
    gemma = fast_target(architecture="gemma3", num_layers=2, dtype="bfloat16")
    assert gemma.layer_stack is None and "gemma3" in gemma.engine_details["layer_stack"]
    monkeypatch.setenv("RACER_BENCH_NO_LAYER_STACK", "1")
    llama = fast_target(dtype="bfloat16")
    assert llama.layer_stack is None and "is set" in llama.engine_details["layer_stack"]
