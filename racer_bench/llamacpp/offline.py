"""``backend=llamacpp``: llama.cpp's AR against the method inside llama.cpp, prompt by prompt.

Two ``llama_cpp.Llama`` engines load the GGUF the model config was made from (:mod:`.compat`):
llama.cpp without speculation (the baseline) and llama.cpp with the method as its draft model
(:mod:`.drafts`: one of our chain drafters, or llama.cpp's own prompt lookup). Every prompt runs
on both back to back, the order alternating with the prompt index, on the thread count the
run's governor gives the prompt (llama.cpp's threads wait for each other by spinning, so a busy
neighbour on one core slows two threads far more than it slows one). Each prompt is one line of
``prompts.jsonl`` in the native record shape, so the native summary serves: the speedup is over
llama.cpp's own AR, ``identical`` counts outputs equal to llama.cpp's AR output. Before the
prompts: the extra buffer types are checked in a child process (:mod:`.bufts`) and a batched
eval is compared with one-token evals (:mod:`.exactness`), which decides the manifest's
``lossless``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig
from tqdm.auto import tqdm

from racer_bench.analysis.summary import summarize
from racer_bench.config.construct import construct, task_max_new_tokens
from racer_bench.engine.drafter import runs_on
from racer_bench.engine.stopping import StopRule
from racer_bench.errors import ConfigError
from racer_bench.llamacpp import bufts, exactness
from racer_bench.llamacpp.compat import gguf_path, require, version
from racer_bench.llamacpp.drafts import DraftHook, LookupProposer, PoolProposer
from racer_bench.llamacpp.engine import LlamaEngine
from racer_bench.llamacpp.peers import LlamaLookup
from racer_bench.record import folder as records
from racer_bench.run import runlock
from racer_bench.run.config import validate
from racer_bench.run.manifest import run_manifest
from racer_bench.run.prompt import failed_record, prompt_head
from racer_bench.run.runner import prompts_to_run
from racer_bench.run.threads import run_load, thread_governor
from racer_bench.system import hardware
from racer_bench.tasks.base import Prompt, Task
from racer_bench.tasks.conversation import conversation
from racer_bench.vllm_backend import step_records

Turns = list[dict[str, Any]]


def validate_choices(cfg: DictConfig, choices: dict[str, str]) -> None:
    """The native checks plus what this backend does not do (one-line ConfigErrors)."""
    validate(cfg)
    if cfg.resume:
        raise ConfigError("resume: not supported with backend=llamacpp; start a new run")
    if choices.get("verifier", "greedy") != "greedy":
        raise ConfigError(f"verifier={choices['verifier']}: backend=llamacpp runs greedy only")
    if cfg.get("reference", "none") != "none":
        raise ConfigError(f"reference={cfg.reference}: runs beside our own loop only "
                          "(backend=native); llama.cpp's baseline is its own AR")  # fmt: skip
    if cfg.get("baseline", "same_run") != "same_run":
        raise ConfigError("baseline=none: backend=llamacpp always times llama.cpp's AR")


def check_method(method: Any) -> None:
    """Refuse what llama.cpp's draft hook cannot feed (it passes token ids only)."""
    if isinstance(method, LlamaLookup) or runs_on(method, "vllm"):
        return
    raise ConfigError(f"method={method.name}: needs the target's hidden states (or runs only "
                      "in another engine); llama.cpp's draft hook gets token ids only; use "
                      "backend=native")  # fmt: skip


def proposer_of(method: Any, cfg: DictConfig, max_new: int) -> Any:
    """The chain proposer of the method's hook (None for AR: no draft model)."""
    if isinstance(method, LlamaLookup):
        return LookupProposer(method.lookup())
    if getattr(method, "name", None) == "ar":
        return None
    k = int(cfg.backend.num_speculative_tokens)
    return PoolProposer(method, k, int(cfg.max_draft), max_new)


def inside_llamacpp(method: Any, k: int) -> dict[str, Any]:
    """What the method receives inside llama.cpp, compared with the native loop, and its label."""
    if isinstance(method, LlamaLookup):
        return {"proposer": "llama-cpp-python LlamaPromptLookupDecoding",
                "receives": ["the context's token ids"], "missing": [], "drafts": "chains",
                "label": "llama.cpp lookup", "chain_max": method.num_pred_tokens}  # fmt: skip
    needs = getattr(method, "needs", None)
    receives, missing = ["committed tokens"], []
    if needs is not None and needs.topk:
        receives.append(f"target top-{needs.topk} at the verified positions (llama.cpp logits)")
    if needs is not None and needs.prefill_topk:
        missing.append("prompt top-k")
    if getattr(method, "aux_capacity", 0):
        missing.append("auxiliary branch (llama.cpp verifies the chain only)")
    qualifiers = ["chain"] + [f"no {m.split(' (')[0]}" for m in missing]
    return {"proposer": "racer_bench drafter through LlamaDraftModel", "receives": receives,
            "missing": missing, "drafts": "trees projected to their most probable chain",
            "label": f"{method.name} ({', '.join(qualifiers)})", "chain_max": k}  # fmt: skip


class LlamaPair:
    """llama.cpp's AR engine and the method's engine (the same GGUF, threads and buffers)."""

    def __init__(self, gguf: Path, n_ctx: int, threads: int, use_extra_bufts: bool,
                 proposer: Any) -> None:  # fmt: skip
        self.baseline = LlamaEngine(gguf, n_ctx, threads, use_extra_bufts)
        self.hook = DraftHook(proposer) if proposer is not None else None
        if self.hook is not None:
            register_hook()
        self.method = LlamaEngine(gguf, n_ctx, threads, use_extra_bufts, draft=self.hook)
        if self.hook is not None:
            self.hook.llm = self.method.llm

    def set_threads(self, threads: int) -> None:
        for engine in (self.baseline, self.method):
            engine.set_threads(threads)

    def close(self) -> None:
        for engine in (self.baseline, self.method):
            engine.close()


def register_hook() -> None:
    """Make :class:`DraftHook` a ``LlamaDraftModel`` (llama-cpp-python's abstract hook)."""
    from llama_cpp.llama_speculative import LlamaDraftModel

    LlamaDraftModel.register(DraftHook)


def turn(engine: LlamaEngine, hook: DraftHook | None, ids: list[int], stop: StopRule,
         decode: Callable[..., str]) -> dict[str, Any]:  # fmt: skip
    """One turn on one engine, with its steps (the hook's notes; AR: one token a step)."""
    if hook is not None:
        hook.start(len(ids))
    done = engine.generate(ids, stop)
    n = len(done.tokens)
    if hook is None:
        steps = step_records.counts_as_steps([], [], n)
    else:
        steps = step_records.steps_from_notes(hook.finish(done.tokens), n)
    text = stop.clean_text(decode(done.tokens, skip_special_tokens=True))
    return records.turn_record(done.tokens, text, done.stop_reason or "length",
                               prefill_time=done.prefill_time, decode_time=done.decode_time,
                               steps=step_records.step_columns(steps))  # fmt: skip


def run_prompt(pair: LlamaPair, task: Task, target: Any, prompt: Prompt, index: int,
               max_new: int, repeat: int = 0) -> dict[str, Any]:  # fmt: skip
    """Both engines on one prompt, the order alternating; scores and identical-to-AR."""
    tok = target.tokenizer
    stop = StopRule(target.eos_ids, max_new, task.stop_strings, decode=tok.decode)
    order = [("baseline", pair.baseline, None), ("method", pair.method, pair.hook)]
    record = prompt_head(prompt, index, repeat)
    for mode, engine, hook in order if (index + repeat) % 2 == 0 else order[::-1]:
        answer = lambda ids, e=engine, h=hook: turn(e, h, ids, stop, tok.decode)  # noqa: E731
        record[mode] = {"turns": conversation(prompt, task, tok, answer)}
    for mode in ("baseline", "method"):
        texts = [t["text"] for t in record[mode]["turns"]]
        record["score" if mode == "method" else "baseline_score"] = task.score(prompt, texts)
    same = [[t["tokens"] for t in record[m]["turns"]] for m in ("method", "baseline")]
    return record | {"identical": same[0] == same[1], "status": "ok"}


def probe_exactness(pair: LlamaPair, ids: list[int], eos: set[int], k: int) -> dict[str, Any]:
    """:func:`.exactness.batch_vs_single` on the method's engine (it keeps all logits), over
    ``k + 1`` tokens of llama.cpp's own AR continuation of ``ids``."""
    done = pair.baseline.generate(ids, StopRule(eos, k + 1))
    engine = pair.method if pair.hook is not None else pair.baseline
    if pair.hook is None:
        return {"positions": 0, "identical": True, "max_abs_logit_diff": 0.0,
                "argmax_equal": True,
                "why": "AR only: no batched eval of draft tokens"}  # fmt: skip
    return exactness.batch_vs_single(engine.llm, ids, done.tokens)


def run(cfg: DictConfig, run_dir: Path, choices: dict[str, str]) -> dict[str, Any]:
    """One llama.cpp-backend run into ``run_dir``; returns the summary."""
    validate_choices(cfg, choices)
    require("backend=llamacpp")
    gguf_path(cfg, "backend=llamacpp")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with runlock.hold(run_dir):
        if (run_dir / records.MANIFEST_FILE).exists():
            raise ConfigError(f"{run_dir} already holds a run; write to another folder")
        return run_in(cfg, run_dir, choices)


def run_in(cfg: DictConfig, run_dir: Path, choices: dict[str, str]) -> dict[str, Any]:
    """Build, probe, record the manifest, warm up, run every prompt, summarize (lock held)."""
    if cfg.num_threads:
        torch.set_num_threads(int(cfg.num_threads))
    task: Task = construct(cfg.task, "task")
    target = construct(cfg.model, "model")  # its tokenizer renders and decodes; EOS ids
    method = construct(cfg.method, "method", vocab_size=target.vocab_size)
    check_method(method)
    max_new = task_max_new_tokens(task, cfg.max_new_tokens)
    threads, gguf = torch.get_num_threads(), gguf_path(cfg, "backend=llamacpp")
    decided = bufts.verdict(gguf, threads, str(cfg.backend.extra_bufts), cfg.paths.cache_dir,
                            version(), float(cfg.backend.probe_timeout_s))  # fmt: skip
    pair = LlamaPair(gguf, int(cfg.backend.n_ctx), threads, bool(decided["use_extra_bufts"]),
                     proposer_of(method, cfg, max_new))  # fmt: skip
    try:
        prompts = task.load()
        first = task.render(prompts[0], 0, [], target.tokenizer)
        k = int(cfg.backend.num_speculative_tokens)
        exact = probe_exactness(pair, first, target.eos_ids, k)
        inside = inside_llamacpp(method, k)
        info = backend_info(cfg, gguf, threads, decided, exact, inside)
        records.write_json(run_dir / records.MANIFEST_FILE,
                           manifest(cfg, choices, target, method, task, max_new, info))  # fmt: skip
        return run_prompts(cfg, pair, task, target, prompts, max_new, run_dir, info)
    finally:
        pair.close()


def run_prompts(cfg: DictConfig, pair: LlamaPair, task: Task, target: Any, prompts: list[Prompt],
                max_new: int, run_dir: Path, info: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """Warm-up prompts (not recorded), then every prompt and repeat, then the summary."""
    for index in range(min(int(cfg.warmup_prompts), len(prompts))):
        run_prompt(pair, task, target, prompts[index], index, max_new)
    (run_dir / records.INCOMPLETE_FILE).write_text("run not finished\n")
    governor, meter = thread_governor(cfg), hardware.LoadMeter().start()
    todo = prompts_to_run(prompts, int(cfg.get("repeats", 1)), set())
    for repeat, index, prompt in tqdm(todo, desc=info["inside"]["label"], unit="prompt"):
        threads = governor.before_prompt() if governor else torch.get_num_threads()
        pair.set_threads(threads)
        try:
            record = run_prompt(pair, task, target, prompt, index, max_new, repeat)
        except ConfigError:
            raise
        except Exception as error:  # recorded as failed, the run goes on
            record = failed_record(prompt, index, error, repeat)
        records.append_prompt(run_dir, record | {"threads": threads})
    load = run_load(meter, 0, governor)
    return finish(run_dir, task, info, load)


def finish(run_dir: Path, task: Task, info: dict[str, Any], load: dict[str, Any]) -> dict[str, Any]:
    """The native summary of the run's lines, with the backend's block."""
    summary = summarize(records.load_prompts(run_dir), task.metric, True)
    fingerprint = records.read_json(run_dir / records.MANIFEST_FILE)["hardware"]
    summary |= {"metric": task.metric, "run_dir": str(run_dir), "backend": "llamacpp",
                "label": info["inside"]["label"], "llamacpp_backend": summary_info(info),
                "load": load, "load_warning": load.get("warning"),
                "hardware": {"id": fingerprint["id"], "label": fingerprint["label"]}}  # fmt: skip
    records.write_json(run_dir / records.SUMMARY_FILE, summary)
    (run_dir / records.INCOMPLETE_FILE).unlink(missing_ok=True)
    return summary


def summary_info(info: dict[str, Any]) -> dict[str, Any]:
    """What the printed setting line says about the engines."""
    return {"llama_cpp_python": info["llama_cpp_python"], "gguf": info["gguf"],
            "threads": info["threads"], "extra_bufts": info["extra_bufts"]["verdict"],
            "use_extra_bufts": info["extra_bufts"]["use_extra_bufts"],
            "lossless": info["lossless"], "lossless_why": info["lossless_why"]}  # fmt: skip


def backend_info(cfg: DictConfig, gguf: Path, threads: int, decided: dict[str, Any],
                 exact: dict[str, Any], inside: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """The manifest's ``backend`` block."""
    lossless, why = exactness.lossless_of(exact)
    return {"name": "llamacpp", "llama_cpp_python": version(), "gguf": gguf.name,
            "n_ctx": int(cfg.backend.n_ctx), "threads": threads,
            "adapt_threads": bool(cfg.get("adapt_threads", True)), "extra_bufts": decided,
            "batch_vs_single": exact, "lossless": lossless, "lossless_why": why,
            "sampling": "greedy (temp=0, repeat_penalty=1)", "inside": inside}  # fmt: skip


def manifest(cfg: DictConfig, choices: dict[str, str], target: Any, method: Any, task: Task,
             max_new: int, info: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """The shared manifest plus the backend's block; the GGUF's weights replace the loaded
    target's dtype (that target only tokenizes here)."""
    return run_manifest(cfg, choices, target, method, task, max_new, verifier="greedy",
                        lossless=info["lossless"], lossless_why=info["lossless_why"],
                        backend=info, dtype=f"gguf:{info['gguf']}", threads=info["threads"],
                        engine={"engine": "llama.cpp",
                                "llama_cpp_python": info["llama_cpp_python"]})  # fmt: skip
