"""llama.cpp itself on the tiny random model written as a GGUF (``conftest.tiny_gguf``): the
reference row in the native rotation, the peer row (llama.cpp's prompt lookup) and our drafters
inside llama.cpp, each counted against its own AR; the child probe on a real GGUF. Skipped where
llama-cpp-python is not installed (CI does not build it)."""

from __future__ import annotations

import json

import pytest

from racer_bench.engine.stopping import StopRule
from racer_bench.llamacpp import bufts
from racer_bench.llamacpp.compat import version
from racer_bench.llamacpp.engine import LlamaEngine
from racer_bench.llamacpp.exactness import batch_vs_single
from racer_bench.llamacpp.offline import run as run_llamacpp
from racer_bench.record.folder import load_prompts
from racer_bench.run.runner import run
from tests.conftest import ar_tokens
from tests.llamacpp.conftest import needs_llama_cpp

pytestmark = [pytest.mark.llamacpp, needs_llama_cpp]

SMOKE = ("model=tiny_random", "task=tiny", "max_new_tokens=16", "warmup_prompts=0")
PROMPT = list(b"the cat sat on the mat. the cat sat on the")


def test_llama_cpp_runs_the_tiny_gguf_greedy_as_our_loop_does(tiny_is_gguf, tiny_target):
    engine = LlamaEngine(tiny_is_gguf, 256, 1, use_extra_bufts=True)
    done = engine.generate(PROMPT, StopRule(set(), 12))
    engine.close()
    assert done.tokens == ar_tokens(tiny_target, PROMPT, max_new_tokens=12)
    assert done.stop_reason == "length" and done.prefill_time > 0 and done.decode_time > 0


def test_the_child_probe_passes_on_a_gguf_that_works(tiny_is_gguf, tmp_path):
    found = bufts.verdict(tiny_is_gguf, 1, "auto", tmp_path, version(), 120.0)
    assert found["verdict"] == "ok" and found["use_extra_bufts"] is True
    assert found["buffers"]  # the child's model buffers, e.g. CPU_Mapped
    with bufts.model_params(False):  # the fallback loads too
        engine = LlamaEngine(tiny_is_gguf, 128, 1, use_extra_bufts=False)
    assert engine.generate(PROMPT, StopRule(set(), 3)).tokens
    engine.close()


def test_a_speculating_engine_runs_past_one_batch_of_context(tiny_is_gguf):
    """With a draft model, llama-cpp-python keeps every position's logits in an array it sizes
    by ``logits_all``; a context past ``N_BATCH`` tokens failed in ``Llama.eval`` before."""
    from racer_bench.llamacpp.engine import N_BATCH

    prompt = (PROMPT * (N_BATCH // len(PROMPT) + 2))[: N_BATCH + 20]
    engine = LlamaEngine(tiny_is_gguf, N_BATCH * 2, 1, True, draft=lambda ids: ids[-4:])
    done = engine.generate(prompt, StopRule(set(), 24))
    engine.close()
    assert len(done.tokens) == 24


def test_batch_and_single_evals_are_compared(tiny_is_gguf, tiny_target):
    engine = LlamaEngine(tiny_is_gguf, 256, 1, True, draft=lambda ids: ids[:0])
    tokens = ar_tokens(tiny_target, PROMPT, max_new_tokens=6)
    probe = batch_vs_single(engine.llm, PROMPT, tokens)
    engine.close()
    assert probe["positions"] == 6 and probe["argmax_equal"] is True
    assert probe["max_abs_logit_diff"] >= 0 and probe["identical"] == (
        probe["max_abs_logit_diff"] == 0
    )


def test_reference_llamacpp_runs_in_the_native_rotation(compose_cfg, tmp_path, tiny_is_gguf):
    cfg = compose_cfg(*SMOKE, "method=pld", "task.limit=3", "reference=[generate,llamacpp]",
                      f"paths.cache_dir={tmp_path / 'cache'}")  # fmt: skip
    summary = run(cfg, tmp_path / "run", {"method": "pld"})
    records = load_prompts(tmp_path / "run")
    turns = [t for r in records for t in r["reference_llamacpp"]["turns"]]
    assert all(0 < len(t["tokens"]) <= 16 and t["prefill_time"] > 0 for t in turns)
    assert summary["llamacpp_tokens_per_s"] > 0 and summary["reference_tokens_per_s"] > 0
    assert summary["llamacpp_identical"] == 1.0  # float32 GGUF of the float64 model: same argmax
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    info = manifest["references"]["reference_llamacpp"]
    assert info["extra_bufts"]["verdict"] == "ok" and info["threads"] >= 1
    assert summary["load"]["steps"] == sum(
        len(t["steps"]["n_draft"]) for r in records for m in ("baseline", "method")
        for t in r[m]["turns"]
    )  # fmt: skip


@pytest.mark.parametrize("method", ["llamacpp_lookup", "pld", "racer"])
def test_backend_llamacpp_counts_outputs_against_its_own_ar(compose_cfg, tmp_path, tiny_is_gguf,
                                                            method):  # fmt: skip
    cfg = compose_cfg(*SMOKE, "backend=llamacpp", f"method={method}", "task.limit=3",
                      f"paths.cache_dir={tmp_path / 'cache'}")  # fmt: skip
    summary = run_llamacpp(cfg, tmp_path / "run", {"method": method})
    records = load_prompts(tmp_path / "run")
    assert summary["backend"] == "llamacpp" and summary["n_prompts"] == 3
    assert summary["baseline_tokens_per_s"] > 0 and summary["tokens_per_s"] > 0
    assert 0.0 <= summary["identical"] <= 1.0 and summary["mat"] >= 1.0
    for r in records:
        for t in r["method"]["turns"]:
            assert sum(t["steps"]["n_committed"]) == len(t["tokens"]) - 1
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    backend = manifest["backend"]
    assert manifest["lossless"] is backend["batch_vs_single"]["identical"]
    assert backend["extra_bufts"]["verdict"] == "ok" and backend["inside"]["label"]
    assert summary["llamacpp_backend"]["lossless_why"] == manifest["lossless_why"]
