"""The layer stack's one call for all layers (``decoder_stack``) against one call per layer
(how a build from before it runs, e.g. in a kernel A/B): the same hidden states and the same
cache bit for bit, across steps that grow the cache and a new sequence's cache."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from racer_bench.engine import kv_cache
from racer_bench.engine.fast import kernel_library
from racer_bench.engine.structs import Draft
from racer_bench.models.loaders import tiny_random

pytestmark = pytest.mark.skipif(
    kernel_library.unavailable_reason() is not None,
    reason=f"kernels unavailable: {kernel_library.unavailable_reason()}",
)


class PerLayerBuild:
    """The loaded library without ``decoder_stack``: the layer stack calls each layer."""

    def __init__(self, lib: Any) -> None:
        self._lib = lib

    def __getattr__(self, name: str) -> Any:
        if name == "decoder_stack":
            raise AttributeError(name)
        return getattr(self._lib, name)


def run_steps(target: Any, prompt: list[int], steps: list[Draft]) -> list[torch.Tensor]:
    """Logits of each step (root = the prompt's last token), committing every node, and the
    cache's keys and values at the end."""
    target.prefill(prompt[:-1])
    out = []
    for draft in steps:
        past = target.length
        out.append(target.forward_tree(prompt[-1], draft).logits)
        target.commit(past, list(range(len(draft))))
    for layer in target.cache.layers:
        out += [layer.keys.clone(), layer.values.clone()]
    return out


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_one_call_for_all_layers_equals_a_call_per_layer(dtype) -> None:
    target = tiny_random(dtype=dtype, num_kv_heads=2)
    target.set_engine("fast")
    assert target.layer_stack is not None
    gen = torch.Generator().manual_seed(0)
    chain = torch.arange(-1, 11)  # 12 chained nodes a step, 44 steps: past the first capacity
    steps = [Draft(tokens=torch.randint(0, target.vocab_size, (12,), generator=gen),
                   parents=chain) for _ in range(44)]  # fmt: skip
    steps += [Draft.empty()] * 3
    for prompt in ([1, 2, 3, 4], [9, 8, 7]):  # the second prefill makes a new cache
        one_call = run_steps(target, prompt, steps)
        with kernel_library.swapped_library(PerLayerBuild(kernel_library.library())):
            per_layer = run_steps(target, prompt, steps)
        assert target.cache.layers[0]._keys.shape[-2] > kv_cache.MIN_CAPACITY  # it grew
        assert len(one_call) == len(per_layer)
        for a, b in zip(one_call, per_layer, strict=True):
            assert torch.equal(a, b)
