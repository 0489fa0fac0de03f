"""Row invariance: a tree step gives every node bit for bit the logits of the AR step.

For random trees (depth 1-8, width 1-16) on the tiny model, each node's logits from one tree
forward are compared with ``torch.equal`` to the logits of 1-token AR steps along the node's
path from the same prefix, on the fast engine at bfloat16, float16 and float32, for Llama and
for Gemma 3 (sliding windows shorter than the context). The eager engine is transformers' own
path and is not row-invariant (library GEMM and SDPA tile by shape): the last test records
that it differs, so the day it does not, the docs can say so.
"""

from __future__ import annotations

import pytest
import torch

from racer_bench.engine.fast import bf16_gemm, kernel_library
from racer_bench.engine.structs import Draft
from racer_bench.engine.target import HFTarget
from racer_bench.models.loaders import tiny_random

pytestmark = pytest.mark.skipif(
    kernel_library.unavailable_reason() is not None,
    reason=f"row-invariant kernels unavailable: {kernel_library.unavailable_reason()}",
)
PROMPT = list(b"a prompt long enough that gemma's sliding window of 8 tokens slides")


def random_tree(gen: torch.Generator, max_depth: int, max_width: int) -> Draft:
    """A random tree of at most ``max_width`` nodes per level and ``max_depth`` levels."""
    parents: list[int] = []
    level = [-1]
    depth = int(torch.randint(1, max_depth + 1, (1,), generator=gen))
    for _ in range(depth):
        width = int(torch.randint(1, max_width + 1, (1,), generator=gen))
        picks = torch.randint(0, len(level), (width,), generator=gen).sort().values.tolist()
        start = len(parents)
        parents += [level[i] for i in picks]
        level = list(range(start, len(parents)))
    tokens = torch.randint(0, 256, (len(parents),), generator=gen)
    return Draft(tokens, torch.tensor(parents))


def path_to(parents: list[int], node: int) -> list[int]:
    path = []
    while node >= 0:
        path.append(node)
        node = parents[node]
    return path[::-1]


def ar_logits(target: HFTarget, root: int, tokens: list[int]) -> torch.Tensor:
    """Logits after feeding ``root`` then ``tokens`` one AR step at a time (last step's)."""
    for token in [root, *tokens]:
        past = target.length
        logits = target.forward_tree(token, Draft.chain([])).logits[0]
        target.commit(past, [])
    return logits


def mismatches(target: HFTarget, trees: int, seed: int = 0) -> tuple[int, int]:
    """(nodes whose tree-step logits differ from the AR step's, nodes checked)."""
    gen = torch.Generator().manual_seed(seed)
    bad = total = 0
    for _ in range(trees):
        draft = random_tree(gen, max_depth=8, max_width=16)
        parents = draft.parents.tolist()
        target.prefill(PROMPT[:-1])
        out = target.forward_tree(PROMPT[-1], draft).logits
        for node in range(len(draft)):
            target.prefill(PROMPT[:-1])
            path = [int(draft.tokens[i]) for i in path_to(parents, node)]
            want = ar_logits(target, PROMPT[-1], path)
            bad += not torch.equal(out[node + 1], want)
            total += 1
    return bad, total


def fast(dtype: str, **kwargs) -> HFTarget:
    target = tiny_random(dtype=dtype, num_kv_heads=2, init_std=0.05, **kwargs)
    target.set_engine("fast")
    return target


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_fast_engine_tree_rows_equal_ar_rows(dtype) -> None:
    bad, total = mismatches(fast(dtype), trees=3)
    assert total > 10
    assert bad == 0, f"{bad} of {total} nodes differ from the AR step"


@pytest.mark.parametrize("kernel", bf16_gemm.BF16_KERNELS)
def test_every_bfloat16_gemm_this_cpu_runs_is_row_invariant(kernel, monkeypatch) -> None:
    """Each bfloat16 kernel forced in turn (AMX tiles, AVX512-BF16 pairs, the widening AVX2
    kernel of machines without either), so every machine checks all the kernels it can run."""
    if bf16_gemm.unable(kernel):
        pytest.skip(f"{kernel}: {bf16_gemm.unable(kernel)}")
    monkeypatch.setenv(bf16_gemm.BF16_ENV, kernel)
    target = fast("bfloat16")
    assert target.engine_details["bf16_gemm"] == kernel
    bad, total = mismatches(target, trees=2, seed=2)
    assert bad == 0, f"{kernel}: {bad} of {total} nodes differ from the AR step"


def test_fast_engine_is_row_invariant_with_sliding_windows() -> None:
    target = fast("bfloat16", architecture="gemma3", num_layers=4)
    bad, total = mismatches(target, trees=2, seed=1)
    assert bad == 0, f"{bad} of {total} nodes differ from the AR step"


def test_committed_tree_path_leaves_the_cache_of_ar() -> None:
    """After accepting a path, the next step's logits equal AR's (the KV it wrote is AR's)."""
    target = fast("bfloat16")
    draft = Draft(torch.tensor([5, 6, 7, 8, 9]), torch.tensor([-1, -1, 0, 1, 2]))
    target.prefill(PROMPT[:-1])
    past = target.length
    target.forward_tree(PROMPT[-1], draft)
    target.commit(past, [0, 2, 4])  # 5 -> 7 -> 9
    after_tree = ar_logits(target, 11, [])
    target.prefill(PROMPT[:-1])
    assert torch.equal(after_tree, ar_logits(target, PROMPT[-1], [5, 7, 9, 11]))


def test_eager_bfloat16_is_not_row_invariant() -> None:
    target = tiny_random(dtype="bfloat16", num_kv_heads=2, init_std=0.05)
    target.set_engine("eager")
    bad, _ = mismatches(target, trees=2)
    assert bad > 0, "eager bf16 became row-invariant: update docs/benchmarks.md"
