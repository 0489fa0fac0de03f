"""``run(cfg, run_dir)``: one benchmark run, AR baseline and method interleaved per prompt."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from racer_bench.analysis import records as R
from racer_bench.analysis import tracking
from racer_bench.analysis.summary import summarize
from racer_bench.engine.cost import CostProfile, check_spec, resolve_profile
from racer_bench.engine.decode import LoopOptions, generate
from racer_bench.engine.drafter import Drafter, NullDrafter
from racer_bench.engine.scheduler import FixedScheduler, Scheduler
from racer_bench.engine.stopping import StopRule
from racer_bench.engine.target import HFTarget
from racer_bench.engine.verify import GreedyVerifier, Verifier
from racer_bench.errors import ConfigError
from racer_bench.tasks.base import Prompt, Task

REPO_ROOT = Path(__file__).resolve().parents[1]
PROFILE_FILE = "cost_profile.json"


@dataclass
class Mode:
    """One way of generating: a drafter with a verifier (``baseline``, ``method``, ``strict``)."""

    name: str
    drafter: Drafter
    verifier: Verifier
    scheduler: Scheduler = field(default_factory=FixedScheduler)


@dataclass
class Setup:
    """Everything instantiated once per run."""

    cfg: DictConfig
    target: HFTarget
    task: Task
    modes: list[Mode]
    options: LoopOptions
    max_new_tokens: int
    profile: CostProfile | None = None  # the scheduler's cost curve, saved in the run folder


def validate(cfg: DictConfig) -> None:
    """Reject bad run-level values with one line naming the key and what is allowed."""
    if not isinstance(cfg.max_new_tokens, int) or cfg.max_new_tokens <= 0:
        raise ConfigError(f"max_new_tokens={cfg.max_new_tokens}: must be a positive integer")
    if not isinstance(cfg.warmup_prompts, int) or cfg.warmup_prompts < 0:
        raise ConfigError(f"warmup_prompts={cfg.warmup_prompts}: must be an integer >= 0")
    if cfg.baseline not in ("same_run", "none"):
        raise ConfigError(f"baseline={cfg.baseline}: allowed values are same_run, none")
    if not isinstance(cfg.seed, int):
        raise ConfigError(f"seed={cfg.seed}: must be an integer")
    if not isinstance(cfg.max_draft, int) or cfg.max_draft < 0:
        raise ConfigError(f"max_draft={cfg.max_draft}: must be an integer >= 0")
    if cfg.get("hardware", "cpu") not in ("cpu", "gpu"):
        raise ConfigError(f"hardware={cfg.hardware}: allowed values are cpu, gpu")
    scheduler = cfg.get("scheduler") or {}
    if scheduler.get("draft_sizing", "cpu") not in ("cpu", "gpu"):
        raise ConfigError(
            f"scheduler.draft_sizing={scheduler.draft_sizing}: allowed values are cpu, gpu"
        )
    if "profile" in scheduler:
        check_spec(scheduler.profile)
    if cfg.resume is not None and not (Path(cfg.resume) / R.MANIFEST_FILE).exists():
        raise ConfigError(f"resume={cfg.resume}: not a run folder (no {R.MANIFEST_FILE})")


def build(cfg: DictConfig) -> Setup:
    """Instantiate target, task, drafters and verifiers from the composed config."""
    validate(cfg)
    if cfg.num_threads:
        torch.set_num_threads(int(cfg.num_threads))
    task: Task = instantiate(cfg.task)
    target: HFTarget = instantiate(cfg.model)
    verifier: Verifier = instantiate(cfg.verifier)
    drafter = instantiate(cfg.method)(vocab_size=target.vocab_size)
    profile = cost_profile(cfg, target, drafter)
    method = Mode("method", drafter, verifier, make_scheduler(cfg, profile))
    modes = [method]
    if cfg.baseline == "same_run":
        modes.insert(0, Mode("baseline", NullDrafter(), verifier))
    if not verifier.lossless:  # lossy verifiers are judged against strict greedy, same drafter
        strict_drafter = instantiate(cfg.method)(vocab_size=target.vocab_size)
        modes.append(Mode("strict", strict_drafter, GreedyVerifier(), make_scheduler(cfg, profile)))
    max_new = task.max_new_tokens or cfg.max_new_tokens
    gc.collect()
    gc.freeze()  # model objects never die: keep full collections from pausing decode steps
    options = LoopOptions(max_draft=cfg.max_draft)
    return Setup(cfg, target, task, modes, options, max_new, profile)


def cost_profile(cfg: DictConfig, target: HFTarget, drafter: Drafter) -> CostProfile | None:
    """The scheduler's cost curve up to the largest forward the drafter can make (or None)."""
    scheduler = cfg.get("scheduler") or {}
    if "profile" not in scheduler:
        return None
    largest = min(int(getattr(drafter, "capacity", cfg.max_draft)), cfg.max_draft)
    largest += 1 + int(getattr(drafter, "aux_capacity", 0))  # the root and any aux branch
    reps = int(scheduler.get("profile_reps", 5))
    return resolve_profile(scheduler.profile, target, cfg.paths.cache_dir, largest, reps)


def make_scheduler(cfg: DictConfig, profile: CostProfile | None) -> Scheduler:
    """A fresh scheduler of ``cfg.scheduler`` (one per mode: each keeps its own statistics)."""
    if "scheduler" not in cfg:
        return FixedScheduler()
    made = instantiate(cfg.scheduler)
    return made(profile=profile) if profile is not None else made


def generate_turns(setup: Setup, mode: Mode, prompt: Prompt, seed: int) -> list[dict[str, Any]]:
    """All turns of one prompt; later turns see this mode's own earlier answers."""
    target, task = setup.target, setup.task
    rng = torch.Generator().manual_seed(seed)
    history: list[str] = []
    out = []
    for turn in range(len(prompt.turns)):
        ids = task.render(prompt, turn, history, target.tokenizer)
        stop = StopRule(target.eos_ids, setup.max_new_tokens, task.stop_strings,
                        decode=target.tokenizer.decode)  # fmt: skip
        result = generate(target, mode.drafter, mode.verifier, ids, stop, rng, setup.options,
                          scheduler=mode.scheduler)  # fmt: skip
        history.append(result.text)
        out.append(R.generation_record(result))
    return out


def run_prompt(setup: Setup, prompt: Prompt, index: int) -> dict[str, Any]:
    """Every mode on one prompt, back to back; the order alternates with the prompt index."""
    record: dict[str, Any] = {"id": prompt.id, "category": prompt.category, "index": index}
    modes = setup.modes if index % 2 == 0 else setup.modes[::-1]
    for mode in modes:
        record[mode.name] = {"turns": generate_turns(setup, mode, prompt, setup.cfg.seed + index)}
    for mode in setup.modes:
        texts = [t["text"] for t in record[mode.name]["turns"]]
        key = "score" if mode.name == "method" else f"{mode.name}_score"
        record[key] = setup.task.score(prompt, texts)
    if "baseline" in record:
        record["identical"] = [t["tokens"] for t in record["method"]["turns"]] == [
            t["tokens"] for t in record["baseline"]["turns"]
        ]
    record["status"] = "ok"
    return record


def failed_record(prompt: Prompt, index: int, error: BaseException) -> dict[str, Any]:
    """A prompt that raised: recorded as failed with its error, never as a fake answer."""
    message = f"{type(error).__name__}: {error}"
    return {"id": prompt.id, "category": prompt.category, "index": index, "status": "failed",
            "error": message}  # fmt: skip


def run_manifest(setup: Setup, choices: dict[str, str]) -> dict[str, Any]:
    method = next(m for m in setup.modes if m.name == "method")
    cfg = setup.cfg
    return R.manifest(
        {
            "model": choices.get("model"),
            "model_name": setup.target.name,
            "method": choices.get("method"),
            "method_version": getattr(method.drafter, "version", None),
            "verifier": choices.get("verifier"),
            "lossless": bool(method.verifier.lossless),
            "task": choices.get("task"),
            "task_version": setup.task.version,
            "dtype": str(setup.target.dtype).removeprefix("torch."),
            "device": R.device_name(setup.target.device),
            "seed": cfg.seed,
            "max_new_tokens": setup.max_new_tokens,
            "persist_across_prompts": bool(
                getattr(method.drafter, "persist_across_prompts", False)
            ),
            "scheduler": choices.get("scheduler") or method.scheduler.name,
            "scheduler_persist_across_prompts": bool(method.scheduler.persist_across_prompts),
            "cost_profile": None
            if setup.profile is None
            else {"file": PROFILE_FILE, "source": setup.profile.meta.get("source")},
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "config": OmegaConf.to_container(cfg, resolve=True),
        },
        REPO_ROOT,
    )


def run(
    cfg: DictConfig,
    run_dir: Path,
    choices: dict[str, str] | None = None,
    on_summary: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run the benchmark into ``run_dir`` (or ``cfg.resume``); return the summary."""
    setup = build(cfg)
    choices = choices or {}
    run_dir = Path(cfg.resume) if cfg.resume else Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if not cfg.resume:
        R.write_json(run_dir / R.MANIFEST_FILE, run_manifest(setup, choices))
    if setup.profile is not None and not (run_dir / PROFILE_FILE).exists():
        setup.profile.save(run_dir / PROFILE_FILE)
    prompts = setup.task.load()
    done = {r["id"] for r in R.load_prompts(run_dir) if r.get("status") == "ok"}
    for index in range(min(cfg.warmup_prompts, len(prompts))):
        run_prompt(setup, prompts[index], index)  # warm-up: same code path, not recorded
    todo = [(i, p) for i, p in enumerate(prompts) if p.id not in done]
    tracker = tracking.start(cfg, run_dir, choices)
    failed = True
    try:
        for index, prompt in tqdm(todo, desc=choices.get("method", "method"), unit="prompt"):
            R.append_prompt(run_dir, safe_run_prompt(setup, prompt, index))
        summary = finalize(setup, run_dir, on_summary)
        tracker.log_summary(summary, run_dir)
        failed = False
    finally:
        tracker.finish(failed=failed)
        if failed:  # interrupted or crashed: finished prompts stay readable, resume= continues
            (run_dir / "INCOMPLETE").write_text("run stopped early; continue with resume=<dir>\n")
    (run_dir / "INCOMPLETE").unlink(missing_ok=True)
    return summary


def safe_run_prompt(setup: Setup, prompt: Prompt, index: int) -> dict[str, Any]:
    """:func:`run_prompt`, with an exception recorded as a failed prompt (the run goes on)."""
    try:
        return run_prompt(setup, prompt, index)
    except (KeyboardInterrupt, ConfigError):
        raise
    except Exception as error:
        return failed_record(prompt, index, error)


def finalize(
    setup: Setup, run_dir: Path, on_summary: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """Summarize every prompt line of the run folder (resumed parts included)."""
    records = R.load_prompts(run_dir)
    category_of = getattr(setup.task, "report_category", lambda c: c)
    has_baseline = any(m.name == "baseline" for m in setup.modes)
    summary = summarize(records, setup.task.metric, has_baseline, category_of)
    summary["metric"] = setup.task.metric
    summary["run_dir"] = str(run_dir)
    R.write_json(run_dir / R.SUMMARY_FILE, summary)
    if on_summary:
        on_summary(summary)
    return summary
