"""Where vLLM's AR decode step goes on this machine (the vLLM backend's engine settings).

    python scripts/profile_vllm_step.py --batches 1 16 --out docs/bench/vllm_step_profile

Builds vLLM without speculation as ``backend=vllm`` does (same dtype, thread binding,
environment), times plain greedy decoding of a HumanEval prompt at each batch size without the
profiler (ms per step), then once more under vLLM's torch profiler and splits the median decode
step into vLLM's phases, the engine loop outside them and the forward's linear / attention /
other operators (racer_bench/vllm_backend/step_profile.py). Prints a Markdown table; ``--out``
also writes it (.md) and the numbers (.json) with the machine's fingerprint.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir

from racer_bench.config.construct import construct
from racer_bench.config.paths import CONF_DIR
from racer_bench.run import resolvers
from racer_bench.vllm_backend import step_profile
from racer_bench.vllm_backend.engines import engine_env, engine_settings, environment, llm_kwargs

PARTS = ["span", "preprocess", "forward", "forward_linear", "forward_attention", "forward_other",
         "forward_between_ops", "postprocess", "sample", "bookkeep", "outside_phases"]  # fmt: skip


def timed_ms_per_step(llm: Any, ids: list[int], batch: int, max_tokens: int) -> float:
    """Wall ms per decode step of plain greedy generation (no profiler): a generation of
    ``max_tokens`` less one of a single token (the prefill), over the steps between them."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    def wall(tokens: int) -> float:
        params = SamplingParams(temperature=0.0, max_tokens=tokens, ignore_eos=True)
        start = time.perf_counter()
        llm.generate([TokensPrompt(prompt_token_ids=ids)] * batch, params, use_tqdm=False)
        return time.perf_counter() - start

    return (wall(max_tokens) - wall(1)) * 1e3 / (max_tokens - 1)


def table(rows: dict[int, dict[str, Any]]) -> str:
    lines = ["| batch | ms/decode step (no profiler) | steps profiled | "
             + " | ".join(PARTS) + " |", "|---:|---:|---:|" + "---:|" * len(PARTS)]  # fmt: skip
    for batch, row in rows.items():
        parts = " | ".join(f"{row['median_ms'][p]:.1f}" for p in PARTS)
        lines.append(f"| {batch} | {row['ms_per_step']:.1f} | {row['steps']} | {parts} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per request")
    parser.add_argument("--out", type=Path, default=None, help="write <out>.md and <out>.json")
    parser.add_argument("overrides", nargs="*", help="config overrides (backend.dtype=...)")
    args = parser.parse_args(argv)
    resolvers.register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", ["backend=vllm", "task=humaneval", "task.limit=1",
                                 *args.overrides])  # fmt: skip
    from vllm import LLM
    from vllm.config import ProfilerConfig

    task, target = construct(cfg.task, "task"), construct(cfg.model, "model")
    ids = task.render(task.load()[0], 0, [], target.tokenizer)
    settings = engine_settings(cfg, target)
    traces = Path(tempfile.mkdtemp(prefix="vllm_trace_"))
    profiler = ProfilerConfig(profiler="torch", torch_profiler_dir=str(traces),
                              torch_profiler_use_gzip=False, torch_profiler_with_stack=False,
                              ignore_frontend=True)  # fmt: skip
    env = engine_env(cfg.backend, None, settings["env"]) | {"VLLM_CUSTOM_SCOPES_FOR_PROFILING": "1"}
    kwargs = llm_kwargs(str(target.model.name_or_path), cfg.backend, settings["dtype"], cfg.seed,
                        None)  # fmt: skip
    with environment(env):
        llm = LLM(**kwargs, profiler_config=profiler)
    rows: dict[int, dict[str, Any]] = {}
    for batch in args.batches:
        timed_ms_per_step(llm, ids, batch, 8)  # warm this batch size
        ms = timed_ms_per_step(llm, ids, batch, args.tokens)
        step_profile.profile_decode(llm, ids, batch, args.tokens)
        trace = step_profile.newest_trace(traces)
        rows[batch] = {"ms_per_step": ms} | step_profile.breakdown(step_profile.load_events(trace))
    text = table(rows)
    print(text)
    result = {"hardware": settings["hardware"], "dtype": settings["dtype"],
              "threads": settings["threads"], "prompt_tokens": len(ids), "tokens": args.tokens,
              "by_batch": {str(b): r for b, r in rows.items()}}  # fmt: skip
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
        hw = settings["hardware"]
        head = (f"vLLM {__import__('vllm').__version__} AR decode, {settings['dtype']}, "
                f"{len(ids)}-token prompt, {args.tokens} new tokens; measured on {hw['label']} "
                f"(hardware id {hw['id']})")  # fmt: skip
        note = "ms, medians over decode steps (racer_bench/vllm_backend/step_profile.py)"
        args.out.with_suffix(".md").write_text(f"{head}\n\n{text}\n\n{note}\n")
    return result


if __name__ == "__main__":
    main()
