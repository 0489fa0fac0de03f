"""``backend=vllm_serve``: AR and the method behind vLLM's OpenAI server, over a concurrency sweep.

Two ``vllm serve`` processes run on loopback, planned as the offline backend's engines are
(:func:`.engines.plan_pair`): one without speculation (the baseline) and one with the method.
For each concurrency, vLLM's own load generator (``vllm bench serve``, run in this process)
sends the task's prompts to both, the order alternating per concurrency, greedy, with the native
loop's stop rule and generation length; its result JSONs (throughput, TTFT / TPOT / ITL / E2EL
percentiles, per-request timings and texts, acceptance per position) are kept in ``serve/``
and turned into records and a summary by :mod:`.serve_records`. A method that learns across
requests gets a fresh server per concurrency. Multi-turn prompts are served their first turn.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig
from tqdm.auto import tqdm

from racer_bench.analysis import serve_summary
from racer_bench.config.construct import construct
from racer_bench.errors import ConfigError
from racer_bench.record import folder as records
from racer_bench.run.manifest import run_manifest
from racer_bench.system import hardware
from racer_bench.tasks.base import Prompt, Task
from racer_bench.vllm_backend import serve_records
from racer_bench.vllm_backend.compat import SUPPORTED_VLLM, is_supported
from racer_bench.vllm_backend.engines import (
    WARM_UP_TEXT,
    PairPlan,
    StepLog,
    manifest_env,
    open_run,
    plan_pair,
)
from racer_bench.vllm_backend.server import VllmServer, free_port, serve_command

DATASET_FILE = "prompts_served.jsonl"
log = logging.getLogger(__name__)


def first_turns(prompts: Sequence[Prompt], task: Task, tokenizer: Any) -> list[list[int]]:
    """Each prompt's first turn, rendered as the native loop renders it (token ids)."""
    return [task.render(p, 0, [], tokenizer) for p in prompts]


def write_dataset(path: Path, texts: Sequence[str], max_new: int) -> None:
    """``vllm bench serve``'s custom dataset: one ``{"prompt", "output_tokens"}`` per line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for text in texts:
            f.write(json.dumps({"prompt": text, "output_tokens": max_new}) + "\n")


def bench_args(base_url: str, model: str, dataset: Path, n: int, concurrency: int, mode: str,
               max_new: int, stop_ids: Sequence[int], stop: Sequence[str],
               result_dir: Path) -> list[str]:  # fmt: skip
    """``vllm bench serve`` arguments for one (concurrency, mode): every prompt once, in order,
    all sent at once (request rate inf) and at most ``concurrency`` in flight; greedy; EOS
    handled as the native loop does (``ignore_eos`` with our stop ids and strings)."""
    extra = {"stop_token_ids": sorted(stop_ids), **({"stop": list(stop)} if stop else {})}
    return ["--backend", "vllm", "--base-url", base_url, "--model", model,
            "--tokenizer", model, "--dataset-name", "custom", "--dataset-path", str(dataset),
            "--skip-chat-template", "--disable-shuffle", "--custom-output-len", str(max_new),
            "--num-prompts", str(n), "--max-concurrency", str(concurrency),
            "--request-rate", "inf", "--temperature", "0", "--ignore-eos",
            "--extra-body", json.dumps(extra), "--num-warmups", "0",
            "--ready-check-timeout-sec", "0",
            "--request-id-prefix", serve_records.request_prefix(concurrency, mode),
            "--percentile-metrics", ",".join(serve_summary.LATENCIES),
            "--metric-percentiles", ",".join(map(str, serve_summary.PERCENTILES)),
            "--save-result", "--save-detailed", "--result-dir", str(result_dir),
            "--result-filename", serve_summary.result_name(concurrency, mode),
            "--disable-tqdm"]  # fmt: skip


def run_bench(args: list[str]) -> dict[str, Any]:
    """``vllm bench serve`` with ``args`` in this process; its result JSON."""
    from vllm.benchmarks.serve import add_cli_args, main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    return main(parser.parse_args(args))


class ServerPair:
    """The baseline server and the method's server, built from the same settings."""

    def __init__(self, plan: PairPlan, run_dir: Path) -> None:
        """Both servers' settings from ``plan`` (:func:`.engines.plan_pair`); none starts yet."""
        self.k = plan.k
        self.speculative = plan.speculative
        self.folder = run_dir / serve_summary.RESULTS_DIR
        self.step_log = StepLog(plan.step_log)
        self.envs = plan.served_envs()
        self.model_path = plan.model_path
        self.build = plan.build[1:]  # (backend, dtype, seed)
        self.timeout = float(plan.backend.ready_timeout_s)
        self.stateful = plan.stateful
        self.servers: dict[str, VllmServer] = {}
        # e.g. read the servers' CPU time: a stopped server's engine process would otherwise
        # count as another program's load (it is no longer our descendant once it exits)
        self.before_stop: Callable[[], None] | None = None

    def commands(self) -> dict[str, list[str]]:
        """Both ``vllm serve`` commands (ports chosen now)."""
        import torch

        gpu = torch.cuda.is_available()
        return {mode: serve_command(self.model_path, free_port(), *self.build, spec, gpu=gpu)
                for mode, spec in (("baseline", None), ("method", self.speculative))}  # fmt: skip

    def start(self, modes: Sequence[str] = serve_summary.MODES) -> None:
        """Start (and warm up) the servers of ``modes``, one after the other."""
        commands = self.commands()
        for mode in modes:
            server = VllmServer(commands[mode], self.envs[mode],
                                self.folder / f"server_{mode}.log", self.timeout)  # fmt: skip
            server.start()
            self.servers[mode] = server
            server.complete(WARM_UP_TEXT, 32)  # first-call costs, on a text of its own
        self.step_log.read_new()  # the warm-up's notes are not part of the run

    def restart_if_stateful(self) -> None:
        """A method that learns across requests (:func:`.engines.keeps_state`) gets a fresh
        server."""
        if self.stateful:
            if self.before_stop is not None:
                self.before_stop()
            self.servers.pop("method").stop()
            self.start(["method"])

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()
        self.servers = {}

    def recorded_env(self) -> dict[str, str]:
        """The method server's environment as the manifest keeps it (no spec, no paths)."""
        return manifest_env(self.envs["method"])


def run(cfg: DictConfig, run_dir: Path, choices: dict[str, str]) -> dict[str, Any]:
    """One serving sweep into ``run_dir``; returns the summary."""
    return open_run(cfg, run_dir, choices, run_in, checks=(validate_serving,))


def validate_serving(cfg: DictConfig) -> None:
    """One-line errors for the sweep's own keys."""
    levels = list(cfg.backend.concurrency)
    if not levels or any(not isinstance(c, int) or c < 1 for c in levels):
        raise ConfigError(f"backend.concurrency={levels}: a list of integers >= 1")


def run_in(cfg: DictConfig, run_dir: Path, choices: dict[str, str]) -> dict[str, Any]:
    """Build, record the manifest, start both servers, sweep, summarize (lock held)."""
    task: Task = construct(cfg.task, "task")
    target = construct(cfg.model, "model")
    method = construct(cfg.method, "method", vocab_size=target.vocab_size)
    plan = plan_pair(cfg, run_dir, task, target, method)
    max_new = plan.max_new
    prompts = task.load()
    multi_turn = sum(len(p.turns) > 1 for p in prompts)
    if multi_turn:
        log.warning("%d prompts have several turns; the server is sent their first", multi_turn)
    ids = first_turns(prompts, task, target.tokenizer)
    dataset = run_dir / serve_summary.RESULTS_DIR / DATASET_FILE
    write_dataset(dataset, [target.tokenizer.decode(i) for i in ids], max_new)
    servers = ServerPair(plan, run_dir)
    info = run_manifest(cfg, choices, target, method, task, max_new, verifier="greedy",
                        lossless=True, dtype=plan.dtype, hardware=plan.settings["hardware"],
                        backend=backend_record(cfg, plan, multi_turn),
                        engine={"engine": "vllm_serve", "dtype": plan.dtype})  # fmt: skip
    records.write_json(run_dir / records.MANIFEST_FILE, info)
    (run_dir / records.INCOMPLETE_FILE).write_text("run not finished\n")
    meter = hardware.LoadMeter(include_children=True).start()
    servers.before_stop = meter.sample
    try:
        servers.start()
        sweep(cfg, servers, task, target, prompts, dataset, max_new, run_dir)
        load = meter.stop()
    finally:
        servers.stop()
    summary = serve_summary.summarize_serving(run_dir, records.load_prompts(run_dir))
    fingerprint = info["hardware"]
    summary |= {"metric": task.metric, "run_dir": str(run_dir), "backend": "vllm",
                "label": plan.receives.get("label"), "load": load, "load_warning": load["warning"],
                "prompt_tokens_match": prompt_tokens_match(run_dir, ids, cfg.backend.concurrency),
                "hardware": {"id": fingerprint["id"], "label": fingerprint["label"]}}  # fmt: skip
    records.write_json(run_dir / records.SUMMARY_FILE, summary)
    (run_dir / records.INCOMPLETE_FILE).unlink(missing_ok=True)
    return summary


def sweep(cfg: DictConfig, servers: ServerPair, task: Task, target: Any, prompts: list[Prompt],
          dataset: Path, max_new: int, run_dir: Path) -> None:  # fmt: skip
    """Every concurrency on both servers, the order alternating; one record per prompt each."""
    for n, c in enumerate(tqdm(list(cfg.backend.concurrency), desc="concurrency", unit="level")):
        if n:
            servers.restart_if_stateful()
        order = serve_summary.MODES if n % 2 == 0 else serve_summary.MODES[::-1]
        results = {}
        for mode in order:
            server = servers.servers[mode]
            args = bench_args(server.base_url, servers.model_path, dataset, len(prompts), c, mode,
                              max_new, target.eos_ids, task.stop_strings,
                              servers.folder)  # fmt: skip
            results[mode] = run_bench(args)
        notes = serve_records.notes_by_index(servers.step_log.read_new(),
                                             serve_records.request_prefix(c, "method"))  # fmt: skip
        for record in serve_records.level_records(prompts, c, results, notes, task):
            records.append_prompt(run_dir, record)


def prompt_tokens_match(run_dir: Path, ids: Sequence[list[int]], levels: Sequence[int]) -> float:
    """Share of prompts the load generator's tokenizer counts as long as our rendering: the
    server is sent text, so this says whether it saw the tokens the native loop would."""
    result = serve_summary.load_results(run_dir, int(levels[0]))["baseline"]
    lens = result.get("input_lens") or []
    return sum(int(a) == len(b) for a, b in zip(lens, ids, strict=False)) / max(len(ids), 1)


def backend_record(cfg: DictConfig, plan: PairPlan, multi_turn: int) -> dict[str, Any]:
    """The manifest's ``backend`` block: vLLM version, server settings
    (:meth:`.engines.PairPlan.engine_record`, one prefix-caching flag for both), the sweep."""
    import vllm

    return {"name": "vllm", "mode": "serve", "vllm_version": vllm.__version__,
            "vllm_supported": SUPPORTED_VLLM,
            "vllm_version_supported": is_supported(vllm.__version__),
            **plan.engine_record(bool(cfg.backend.get("prefix_caching", False))),
            "concurrency": list(cfg.backend.concurrency),
            "load_generator": "vllm bench serve (in process), request rate inf",
            "turns_served": "first", "multi_turn_prompts": multi_turn,
            "fresh_server_per_concurrency": plan.stateful}  # fmt: skip
