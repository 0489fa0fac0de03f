"""``backend=vllm``: AR and the method inside vLLM, interleaved per batch, at each batch size.

Two engines are built from the same model folder and plan (:func:`.engines.plan_pair`): vLLM
without speculation (the baseline) and vLLM with the method (our drafter through
``custom_class`` and :mod:`.plugin`, or one of vLLM's own proposers). For each batch size the
prompts are cut into batches of that size and every batch runs on both engines back to back,
the order alternating, so machine noise hits both alike. Each (prompt, batch size) becomes one
line of ``prompts.jsonl`` in the native record shape (:mod:`.step_records`), so the same
metrics, summaries and tables serve both backends.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from racer_bench.analysis import metrics as run_metrics
from racer_bench.analysis.summary import summarize_batches
from racer_bench.config.construct import construct
from racer_bench.record import folder as records
from racer_bench.run.manifest import run_manifest
from racer_bench.system import hardware
from racer_bench.tasks.base import Prompt, Task
from racer_bench.tasks.conversation import conversations
from racer_bench.vllm_backend import step_records
from racer_bench.vllm_backend.batching import PlannedBatch, plan_batches, plan_summary
from racer_bench.vllm_backend.compat import SUPPORTED_VLLM, is_supported
from racer_bench.vllm_backend.engines import (
    WARM_UP_TEXT,
    PairPlan,
    StepLog,
    environment,
    llm_kwargs,
    manifest_env,
    open_run,
    plan_pair,
)

log = logging.getLogger(__name__)


def make_llm(model_path: str, backend: DictConfig, dtype: str, seed: int,
             speculative: dict[str, Any] | None) -> Any:  # fmt: skip
    """One ``vllm.LLM`` (its engine runs in processes of its own)."""
    from vllm import LLM

    return LLM(**llm_kwargs(model_path, backend, dtype, seed, speculative))


def stop_reason(completion: Any) -> str:
    """vLLM's finish reason in the native record's words."""
    if completion.finish_reason == "length":
        return "length"
    return "stop" if isinstance(completion.stop_reason, str) else "eos"


def spec_counts(completion: Any) -> dict[str, int] | None:
    """vLLM's own per-request spec-decode totals (None without speculation)."""
    metrics = getattr(completion, "spec_decode_metrics", None)
    if metrics is None:
        return None
    counts = metrics.to_dict()
    keys = ("num_spec_steps", "num_accepted_draft_tokens", "num_draft_tokens")
    return {k: int(counts[k]) for k in keys}


def turn_steps(completion: Any, notes: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Steps of one turn: our proposer's notes, else vLLM's counters, else AR steps."""
    n = len(completion.token_ids)
    if notes:
        return step_records.steps_from_notes(notes, n)
    metrics = getattr(completion, "spec_decode_metrics", None)
    counts = metrics.to_dict() if metrics is not None else {}
    return step_records.counts_as_steps(counts.get("per_step_accepted", []),
                             counts.get("per_step_drafted", []), n)  # fmt: skip


def generate_batch(llm: Any, prompts: Sequence[Prompt], task: Task, tokenizer: Any,
                   params: Any, log: StepLog) -> list[list[dict[str, Any]]]:  # fmt: skip
    """Every turn of a batch of prompts; later turns see each prompt's own earlier answers.

    The batch's wall time is shared among its prompts by their new tokens, so the summed times
    give the batch's throughput.
    """
    from vllm.inputs import TokensPrompt

    def answer(ids: list[list[int]]) -> list[dict[str, Any]]:
        start = time.perf_counter()
        results = llm.generate([TokensPrompt(prompt_token_ids=i) for i in ids], params,
                               use_tqdm=False)  # fmt: skip
        wall = time.perf_counter() - start
        notes = log.read_new()
        total = sum(len(r.outputs[0].token_ids) for r in results) or 1
        turns = []
        for result in results:
            done = result.outputs[0]
            tokens = list(done.token_ids)
            steps = turn_steps(done, notes.get(str(result.request_id)))
            turn = step_records.turn_record(tokens, done.text, wall * len(tokens) / total,
                                 stop_reason(done), steps)  # fmt: skip
            turns.append(turn | {"vllm_spec": spec_counts(done)})
        return turns

    return conversations(prompts, task, tokenizer, answer)


def prompt_record(prompt: Prompt, index: int, batch_size: int, batch: PlannedBatch, task: Task,
                  turns: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:  # fmt: skip
    """One (prompt, batch size, pass) line: both modes' turns, scores, identical-to-AR and the
    request's acceptance histogram (steps by accepted draft tokens, bonus excluded).

    Its id is ``<prompt>@b<size>`` in the first pass and ``<prompt>@b<size>#r<n>`` in pass n;
    ``repeat`` and ``batch`` name its timed batch (:mod:`.batching`).
    """
    record: dict[str, Any] = {"id": records.repeat_id(f"{prompt.id}@b{batch_size}", batch.repeat),
                              "prompt_id": prompt.id, "category": prompt.category,
                              "index": index, "batch_size": batch_size, "batch": batch.batch,
                              "repeat": batch.repeat}  # fmt: skip
    for mode, mode_turns in turns.items():
        record[mode] = {"turns": mode_turns}
        key = "score" if mode == "method" else f"{mode}_score"
        record[key] = task.score(prompt, [t["text"] for t in mode_turns])
    record["identical"] = [t["tokens"] for t in turns["method"]] == [
        t["tokens"] for t in turns["baseline"]
    ]
    record["acceptance_hist"] = run_metrics.acceptance_histogram([record], "method")
    record["status"] = "ok"
    return record


class VllmEngines:
    """The baseline engine and the method's engine, with what the run needs to drive them."""

    def __init__(self, plan: PairPlan) -> None:
        """Both engines from ``plan`` (:func:`.engines.plan_pair`), spawned under its ``env``."""
        self.k = plan.k
        self.speculative = plan.speculative
        self.log = StepLog(plan.step_log)
        self.env = plan.env
        self.model_path = plan.model_path
        self.dtype = plan.dtype
        key = json.dumps([self.model_path, self.dtype, plan.seed, self.recorded_env(),
                          OmegaConf.to_container(plan.backend, resolve=True)])  # fmt: skip
        self.stateful = plan.stateful
        self.before_close: Callable[[], None] | None = None  # e.g. read the engines' CPU time
        self.warm_ids: list[int] = []  # the warm-up prompt, once warm_up has run
        self._build = plan.build
        with environment(self.env):
            self.baseline = baseline_engine(key, *self._build)
        self.method = self.new_method_engine()

    def new_method_engine(self) -> Any:
        """A fresh engine with the method (its proposers start with no state)."""
        with environment(self.env):
            return make_llm(*self._build, self.speculative)

    def restart_if_stateful(self) -> None:
        """Before another batch size or pass: a method that learns across requests starts
        afresh, so it never drafts a prompt from its own earlier output; the new engine is
        warmed up as the first one was (its first-call costs are not measured either)."""
        if self.stateful:
            self.close()
            self.method = self.new_method_engine()
            if self.warm_ids:
                warm(self.method, self.warm_ids)
                self.log.read_new()

    def prefix_caching(self) -> dict[str, bool]:
        """Whether each engine was built with vLLM's prefix cache (the same on both)."""
        return {mode: bool(llm_kwargs(*self._build, spec)["enable_prefix_caching"])
                for mode, spec in (("baseline", None), ("method", self.speculative))}  # fmt: skip

    def close(self) -> None:
        """Shut the method's engine down (the baseline engine stays for the next run)."""
        if self.before_close is not None:
            self.before_close()
        core = getattr(getattr(self.method, "llm_engine", None), "engine_core", None)
        if core is not None:
            core.shutdown()
        self.method = None

    def recorded_env(self) -> dict[str, str]:
        """The engines' environment as the manifest keeps it (no spec, no paths)."""
        return manifest_env(self.env)


_BASELINES: dict[str, Any] = {}


def baseline_engine(key: str, model_path: str, backend: DictConfig, dtype: str, seed: int) -> Any:
    """vLLM without speculation, built once per process and settings: the jobs of a multirun
    (``-m method=pld,racer``) share it instead of each starting its own (about a minute)."""
    if key not in _BASELINES:
        _BASELINES.clear()  # other settings: one idle engine at most
        _BASELINES[key] = make_llm(model_path, backend, dtype, seed, None)
    return _BASELINES[key]


def sampling_params(target: Any, task: Task, max_new: int) -> Any:
    """Greedy, stopping exactly where the native loop stops: the same EOS ids and strings."""
    from vllm import SamplingParams

    return SamplingParams(temperature=0.0, max_tokens=max_new, ignore_eos=True,
                          stop_token_ids=sorted(target.eos_ids),
                          stop=list(task.stop_strings) or None)  # fmt: skip


def run_batches(cfg: DictConfig, engines: VllmEngines, task: Task, target: Any,
                prompts: list[Prompt], params: Any, run_dir: Path) -> None:  # fmt: skip
    """Every batch size, every planned batch (passes until ``backend.min_batches``,
    :mod:`.batching`) on both engines, the order alternating batch by batch across passes;
    one line per prompt and pass."""
    tokenizer = target.tokenizer
    min_batches = int(cfg.backend.get("min_batches", 1))
    for i, b in enumerate(cfg.backend.batch_sizes):
        if b > len(prompts):
            log.warning("batch size %d: the task has %d prompts, so its batches hold %d", b,
                        len(prompts), len(prompts))  # fmt: skip
        plan = plan_batches(len(prompts), b, min_batches)
        for n, planned in enumerate(tqdm(plan, desc=f"batch {b}", unit="batch")):
            if planned.batch == 0 and (i or planned.repeat):
                engines.restart_if_stateful()
            chunk = prompts[planned.start : planned.stop]
            order = [("baseline", engines.baseline), ("method", engines.method)]
            turns = {mode: generate_batch(llm, chunk, task, tokenizer, params, engines.log)
                     for mode, llm in (order if n % 2 == 0 else order[::-1])}  # fmt: skip
            for j, prompt in enumerate(chunk):
                per_mode = {mode: turns[mode][j] for mode in ("baseline", "method")}
                record = prompt_record(prompt, planned.start + j, b, planned, task, per_mode)
                records.append_prompt(run_dir, record)


def warm_up(engines: VllmEngines, target: Any, n: int) -> None:
    """A short generation on both engines (first-call costs are not measured), on a text of its
    own, so a method that learns across requests has seen none of the task's prompts."""
    if n <= 0:
        return
    engines.warm_ids = list(target.tokenizer.encode(WARM_UP_TEXT))
    for llm in (engines.baseline, engines.method):
        warm(llm, engines.warm_ids)
    engines.log.read_new()  # its proposer notes are not part of the run


def warm(llm: Any, ids: list[int]) -> None:
    """One short greedy generation on an engine (its first-call costs)."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    llm.generate([TokensPrompt(prompt_token_ids=ids)], SamplingParams(temperature=0.0,
                 max_tokens=32), use_tqdm=False)  # fmt: skip


def run(cfg: DictConfig, run_dir: Path, choices: dict[str, str]) -> dict[str, Any]:
    """One vLLM-backend run into ``run_dir``; returns the summary."""
    return open_run(cfg, run_dir, choices, run_in)


def run_in(cfg: DictConfig, run_dir: Path, choices: dict[str, str]) -> dict[str, Any]:
    """Build, record the manifest, warm up, run every batch size, summarize (lock held)."""
    task: Task = construct(cfg.task, "task")
    target = construct(cfg.model, "model")
    method = construct(cfg.method, "method", vocab_size=target.vocab_size)
    plan = plan_pair(cfg, run_dir, task, target, method)
    engines = VllmEngines(plan)
    prompts = task.load()
    info = manifest(cfg, choices, target, method, task, engines, plan, len(prompts))
    records.write_json(run_dir / records.MANIFEST_FILE, info)
    warm_up(engines, target, cfg.warmup_prompts)
    (run_dir / records.INCOMPLETE_FILE).write_text("run not finished\n")
    meter = hardware.LoadMeter(include_children=True).start()
    engines.before_close = meter.sample  # an engine restarted per batch size keeps its CPU time
    try:
        params = sampling_params(target, task, plan.max_new)
        run_batches(cfg, engines, task, target, prompts, params, run_dir)
        load = meter.stop()
    finally:
        engines.close()
    summary = summarize_batches(records.load_prompts(run_dir), task.metric, engines.k)
    fingerprint = info["hardware"]
    summary |= {"metric": task.metric, "run_dir": str(run_dir), "backend": "vllm",
                "label": plan.receives.get("label"), "load": load,
                "load_warning": load["warning"],
                "hardware": {"id": fingerprint["id"], "label": fingerprint["label"]}}  # fmt: skip
    records.write_json(run_dir / records.SUMMARY_FILE, summary)
    (run_dir / records.INCOMPLETE_FILE).unlink(missing_ok=True)
    return summary


def manifest(cfg: DictConfig, choices: dict[str, str], target: Any, method: Any, task: Task,
             engines: VllmEngines, plan: PairPlan, n_prompts: int) -> dict[str, Any]:  # fmt: skip
    """The shared manifest plus the backend's: vLLM version, the engines
    (:meth:`.engines.PairPlan.engine_record`, prefix caching per engine), the batches timed at
    each batch size over ``n_prompts``. The engines' dtype replaces the loaded target's (which
    only tokenizes here) as the run's ``dtype``."""
    import vllm

    min_batches = int(cfg.backend.get("min_batches", 1))
    batch_plan = {str(b): plan_summary(n_prompts, b, min_batches)
                  for b in cfg.backend.batch_sizes}  # fmt: skip
    backend = {"name": "vllm", "vllm_version": vllm.__version__,
               "vllm_supported": SUPPORTED_VLLM,
               "vllm_version_supported": is_supported(vllm.__version__),
               **plan.engine_record(engines.prefix_caching()),
               "batch_sizes": list(cfg.backend.batch_sizes), "min_batches": min_batches,
               "batch_plan": batch_plan}  # fmt: skip
    return run_manifest(cfg, choices, target, method, task, plan.max_new, verifier="greedy",
                        lossless=True, backend=backend, dtype=plan.dtype,
                        hardware=plan.settings["hardware"],
                        engine={"engine": "vllm", "vllm_version": vllm.__version__,
                                "dtype": plan.dtype})  # fmt: skip
