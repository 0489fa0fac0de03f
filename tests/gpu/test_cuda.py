"""CUDA checks (``pytest -m gpu``; skipped without a GPU): the same loop on the device."""

from __future__ import annotations

import pytest
import torch
from hydra.utils import instantiate

from racer_bench.config.construct import constructor_node
from racer_bench.engine.drafter import NullDrafter
from racer_bench.models.loaders import tiny_random
from racer_bench.run.runner import run
from tests.conftest import TINY_PROMPTS, run_generate
from tests.methods.test_conformance import METHODS  # every native method (not vLLM-only ones)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


@pytest.fixture(scope="module")
def cuda_target():
    return tiny_random(dtype="float32", device="cuda")


@pytest.mark.parametrize("method", METHODS)
def test_methods_lossless_on_cuda_fp32(method, compose_cfg, cuda_target):
    cfg = compose_cfg(f"method={method}", "model=tiny_random")
    drafter = instantiate(constructor_node(cfg.method))(vocab_size=cuda_target.vocab_size)
    for prompt_bytes in TINY_PROMPTS[:3]:
        prompt = list(prompt_bytes)
        expected = run_generate(cuda_target, NullDrafter(), prompt, max_new_tokens=32).tokens
        got = run_generate(cuda_target, drafter, prompt, max_new_tokens=32).tokens
        assert got == expected, method


def test_fp16_tree_forward_matches_sequential_argmax_mostly():
    """fp16 tree attention may flip near-ties; report, and require most prompts identical."""
    target = tiny_random(dtype="float16", device="cuda", init_std=0.3)
    from tests.helpers import OracleDrafter

    same = 0
    for prompt_bytes in TINY_PROMPTS:
        prompt = list(prompt_bytes)
        ar = run_generate(target, NullDrafter(), prompt, max_new_tokens=32).tokens
        oracle = OracleDrafter(ar, len(prompt), depth=8, width=2, vocab_size=target.vocab_size)
        same += run_generate(target, oracle, prompt, max_new_tokens=32).tokens == ar
    assert same >= len(TINY_PROMPTS) - 1


def test_runner_on_cuda_writes_device_and_times(compose_cfg, tmp_path):
    cfg = compose_cfg("model=tiny_random", "model.device=cuda", "model.dtype=float32",
                      "method=pld", "task=tiny", "task.limit=2", "max_new_tokens=16")  # fmt: skip
    summary = run(cfg, tmp_path, {"method": "pld"})
    assert summary["identical"] == 1.0 and summary["tokens_per_s"] > 0
    import json

    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert "cpu" not in manifest["device"].lower()
