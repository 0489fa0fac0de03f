"""``run(cfg, run_dir)``: one benchmark run, AR baseline and method interleaved per prompt."""

from __future__ import annotations

import gc
import hashlib
import json
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from racer_bench.analysis import records as R
from racer_bench.analysis import tracking
from racer_bench.analysis.summary import summarize
from racer_bench.analysis.tracking import LoggerConfig
from racer_bench.config.backend import BackendConfig
from racer_bench.config.construct import construct, task_max_new_tokens
from racer_bench.config.paths import DEFAULT_CACHE_DIR, REPO_ROOT
from racer_bench.config.schema import Instantiable, NonNegativeInt, PositiveInt, Seed, check
from racer_bench.engine import engine_choice
from racer_bench.engine.cost import CostProfile
from racer_bench.engine.decode import LoopOptions, generate
from racer_bench.engine.drafter import Drafter, NullDrafter, runs_on
from racer_bench.engine.floor import floor_record
from racer_bench.engine.scheduler import ConfidenceScheduler, FixedScheduler, Scheduler
from racer_bench.engine.scheduler_settings import SchedulerSettings, settings_of
from racer_bench.engine.stopping import StopRule
from racer_bench.engine.target import Engine, HFTarget
from racer_bench.engine.verify import GreedyVerifier, Verifier
from racer_bench.errors import ConfigError, RunStopped
from racer_bench.models.loaders import resolve_device
from racer_bench.run import resume, runlock
from racer_bench.run.paired import compare_with_strict
from racer_bench.run.reference import REFERENCE, reference_turns
from racer_bench.system import hardware, interrupts
from racer_bench.tasks.base import Prompt, Task

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
    engine_choice: dict[str, Any] = field(default_factory=dict)  # requested, chosen, why
    # measured curves per torch thread count, once the governor changed the threads
    profiles: dict[int, CostProfile] = field(default_factory=dict)
    # reference=generate: the eager target transformers' generate() is timed on (else None)
    reference: HFTarget | None = None
    # the weight-read floor of an AR step on this machine (None off a CPU)
    floor: dict[str, Any] | None = None


@dataclass
class PathsConfig:
    """Schema of ``conf/paths/default.yaml``."""

    data_dir: str = "data"
    cache_dir: str = DEFAULT_CACHE_DIR
    results_dir: str = "results"


@dataclass
class RunConfig:
    """Schema of ``conf/config.yaml``: the run-level keys and the groups below them.

    Groups with ``_target_`` (model, method, verifier, task) are described by their targets'
    signatures (:mod:`racer_bench.config.schema`); a new top-level key or group is declared here.
    """

    seed: Seed = 0
    max_new_tokens: PositiveInt = 256
    warmup_prompts: NonNegativeInt = 1
    baseline: Literal["same_run", "none"] = "same_run"
    reference: Literal["none", "generate"] = "none"
    resume: str | None = None
    max_draft: NonNegativeInt = 256
    num_threads: PositiveInt | None = None
    adapt_threads: bool = True
    hardware: Literal["cpu", "gpu"] = "cpu"
    engine: Engine = "auto"
    experiment_name: str = "adhoc"
    tags: list[str] = field(default_factory=list)
    model: Instantiable = field(default_factory=dict)
    method: Instantiable = field(default_factory=dict)
    verifier: Instantiable = field(default_factory=dict)
    task: Instantiable = field(default_factory=dict)
    scheduler: Instantiable = field(default_factory=dict)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    backend: BackendConfig = field(default_factory=BackendConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    # conf/experiment/racer_ablation.yaml: the variant and the method keys of each variant
    ablation: str | None = None
    ablations: dict[str, dict[str, Any]] = field(default_factory=dict)


def validate(cfg: DictConfig) -> None:
    """Check every key against :class:`RunConfig` before anything loads (one-line ConfigError)."""
    check(cfg, RunConfig)
    scheduler_settings(cfg)  # checks what the schema cannot (a profile spec)


def build(cfg: DictConfig) -> Setup:
    """Instantiate target, task, drafters and verifiers from the composed config."""
    validate(cfg)
    if cfg.num_threads:
        torch.set_num_threads(int(cfg.num_threads))
    task: Task = construct(cfg.task, "task")
    target, engine_choice = choose_engine(cfg)
    verifier: Verifier = construct(cfg.verifier, "verifier")
    drafter = construct(cfg.method, "method", vocab_size=target.vocab_size)
    check_native(drafter, cfg)
    settings = scheduler_settings(cfg)
    profile = cost_profile(settings, cfg, target, drafter)
    method = Mode("method", drafter, verifier, settings.make(profile))
    modes = [method]
    if cfg.baseline == "same_run":
        modes.insert(0, Mode("baseline", NullDrafter(), verifier))
    if not verifier.lossless:  # lossy verifiers are judged against strict greedy, same drafter
        strict_drafter = construct(cfg.method, "method", vocab_size=target.vocab_size)
        modes.append(Mode("strict", strict_drafter, GreedyVerifier(), settings.make(profile)))
    max_new = task_max_new_tokens(task, cfg.max_new_tokens)
    reference = reference_target(cfg, target)
    gc.collect()
    gc.freeze()  # model objects never die: keep full collections from pausing decode steps
    options = LoopOptions(max_draft=cfg.max_draft)
    floor = floor_record(target.model, cfg.paths.cache_dir) if target.device.type == "cpu" else None
    return Setup(cfg, target, task, modes, options, max_new, profile, engine_choice,
                 reference=reference, floor=floor)  # fmt: skip


def reference_target(cfg: DictConfig, target: HFTarget) -> HFTarget | None:
    """The target ``generate()`` runs on with ``reference=generate``: the run's own when it
    runs the eager engine, else a second copy as transformers ships it (None without one)."""
    if cfg.get("reference", "none") != "generate":
        return None
    if target.engine == "eager":
        return target
    return construct(model_at(cfg, str(target.dtype).removeprefix("torch.")), "model")


def model_at(cfg: DictConfig, dtype: str) -> DictConfig:
    """The model node with ``dtype`` in place of its own (``auto`` resolved by the choice)."""
    node = OmegaConf.create(OmegaConf.to_container(cfg.model, resolve=True))
    if "dtype" in node:
        node.dtype = dtype
    return node


def choose_engine(cfg: DictConfig) -> tuple[HFTarget, dict[str, Any]]:
    """The target at the configured engine and dtype, and what was asked, what runs and why.

    ``engine=auto`` and ``model.dtype=auto`` time and probe every allowed (engine, dtype) pair on
    first use on this machine and model and keep the fastest exact one
    (:mod:`racer_bench.engine.engine_choice`); the timings go into the manifest.
    """
    engine = str(cfg.get("engine", "auto"))
    dtype = str(cfg.model.get("dtype", "auto"))
    device = str(resolve_device(str(cfg.model.get("device", "auto"))))

    def build(chosen: str) -> HFTarget:
        return construct(model_at(cfg, chosen), "model")

    return engine_choice.choose(build, engine, dtype, cfg.paths.cache_dir, model_key(cfg), device)


def model_key(cfg: DictConfig) -> str:
    """A file-name-safe key for the model node: its name and a hash of its other settings."""
    node = OmegaConf.to_container(cfg.model, resolve=True)
    assert isinstance(node, dict)
    name = str(node.get("name") or node.get("path") or node["_target_"].rsplit(".", 1)[-1])
    rest = {k: v for k, v in node.items() if k != "dtype"}
    digest = hashlib.sha256(json.dumps(rest, sort_keys=True, default=str).encode()).hexdigest()
    return f"{name}-{digest[:8]}"


def check_native(drafter: Drafter, cfg: DictConfig) -> None:
    """Refuse a method that runs only inside another engine (vLLM's own proposers)."""
    if not runs_on(drafter, "native"):
        method = cfg.method.get("method", type(drafter).__name__)
        raise ConfigError(f"method: vLLM's own proposer ({method}) runs only with backend=vllm")


def scheduler_name(choice: str | None, scheduler: Any) -> str:
    """The manifest's ``scheduler``: the YAML chosen, or for ``auto`` the scheduler it picked
    (tables group runs by it; ``choices.scheduler`` keeps ``auto``)."""
    return scheduler.name if choice in (None, "auto") else choice


def scheduler_settings(cfg: DictConfig) -> SchedulerSettings:
    """The scheduler group's settings (fixed, sized by ``hardware``, for configs without one)."""
    return settings_of(cfg.get("scheduler"), cfg.get("hardware", "cpu"))


def cost_profile(
    settings: SchedulerSettings, cfg: DictConfig, target: HFTarget, drafter: Drafter
) -> CostProfile | None:
    """The scheduler's cost curve up to the largest forward the drafter can make (or None)."""
    wanted = settings.profile_settings()
    if wanted is None:
        return None
    largest = min(int(getattr(drafter, "capacity", cfg.max_draft)), cfg.max_draft)
    largest += 1 + int(getattr(drafter, "aux_capacity", 0))  # the root and any aux branch
    return wanted.resolve(target, cfg.paths.cache_dir, largest)


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


def contenders(
    setup: Setup, index: int
) -> list[tuple[str, Callable[[Prompt], list[dict[str, Any]]]]]:
    """Record key and turn generator of every mode (and of ``generate()`` with a reference),
    in the order prompt ``index`` runs them: reversed on odd prompts, so drift hits all alike."""
    seed = setup.cfg.seed + index
    out: list[tuple[str, Callable[[Prompt], list[dict[str, Any]]]]] = [
        (m.name, lambda p, m=m: generate_turns(setup, m, p, seed)) for m in setup.modes
    ]
    if setup.reference is not None:
        ref = setup.reference
        out.append((REFERENCE, lambda p: reference_turns(ref, setup.task, p, setup.max_new_tokens)))
    return out if index % 2 == 0 else out[::-1]


def run_prompt(setup: Setup, prompt: Prompt, index: int) -> dict[str, Any]:
    """Every mode on one prompt, back to back; the order alternates with the prompt index.

    With a strict-greedy mode, each lossy mode's answer agreement and every output's target
    log-probability follow (:mod:`racer_bench.run.paired`), after all timed decoding.
    """
    record: dict[str, Any] = {"id": prompt.id, "category": prompt.category, "index": index}
    for name, turns_of in contenders(setup, index):
        record[name] = {"turns": turns_of(prompt)}
    for mode in setup.modes:
        texts = [t["text"] for t in record[mode.name]["turns"]]
        key = "score" if mode.name == "method" else f"{mode.name}_score"
        record[key] = setup.task.score(prompt, texts)
    compare_with_strict(setup.target, setup.task, prompt, record)  # lossy verifiers only
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
            "choices": {k: v for k, v in choices.items() if not k.startswith("hydra")},
            "dtype": str(setup.target.dtype).removeprefix("torch."),
            "device": R.device_name(setup.target.device),
            "engine": setup.target.engine_details,
            "engine_choice": setup.engine_choice,
            "floor": setup.floor,
            "threads": torch.get_num_threads(),
            "seed": cfg.seed,
            "max_new_tokens": setup.max_new_tokens,
            "persist_across_prompts": bool(
                getattr(method.drafter, "persist_across_prompts", False)
            ),
            "scheduler": scheduler_name(choices.get("scheduler"), method.scheduler),
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
    overrides: Sequence[str] = (),
) -> dict[str, Any]:
    """Run the benchmark into ``run_dir``, or continue the run folder ``cfg.resume``.

    With ``resume`` set, the run's own saved configuration is used; ``overrides`` (this
    invocation's command-line overrides) may only change keys that do not change results
    (:mod:`racer_bench.run.resume`). Ctrl-C or SIGTERM raise :class:`RunStopped` after leaving the
    folder resumable. Returns the summary.
    """
    choices = dict(choices or {})
    resumed = None
    if cfg.resume:
        resumed = resume.restore(cfg, overrides, choices)
        cfg, choices, run_dir = resumed.cfg, resumed.choices, Path(str(cfg.resume))
    validate(cfg)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with runlock.hold(run_dir), interrupts.sigterm_as_interrupt():
        if resumed is None and _holds_run(run_dir):
            raise ConfigError(f"{run_dir} already holds a run; continue it with resume={run_dir} "
                              "or write to another folder")  # fmt: skip
        if resumed is not None and resume.is_finished(run_dir):
            print(f"run folder {run_dir} is already finished; nothing to resume")
            return R.read_json(run_dir / R.SUMMARY_FILE)
        return _run_in(cfg, run_dir, choices, on_summary, resumed)


def _holds_run(run_dir: Path) -> bool:
    return any((run_dir / name).exists() for name in (R.MANIFEST_FILE, R.PROMPTS_FILE))


def _run_in(
    cfg: DictConfig,
    run_dir: Path,
    choices: dict[str, str],
    on_summary: Callable[[dict[str, Any]], None] | None,
    resumed: resume.Resumed | None,
) -> dict[str, Any]:
    """Load everything, then every prompt not yet done (the lock on ``run_dir`` is held)."""
    total: int | None = None
    try:
        setup = build(cfg)
        if setup.profile is not None and not (run_dir / PROFILE_FILE).exists():
            setup.profile.save(run_dir / PROFILE_FILE)
        if resumed is None:
            R.write_json(run_dir / R.MANIFEST_FILE, run_manifest(setup, choices))
        else:
            torn = R.drop_torn_tail(run_dir)
            if torn is not None:
                print(f"dropped a torn last line of {R.PROMPTS_FILE} (kept in {torn}); "
                      "that prompt is redone")  # fmt: skip
            device = R.device_name(setup.target.device)
            resume.record_event(run_dir, resumed.changed, device, len(R.finished_ids(run_dir)))
        prompts = setup.task.load()
        total = len(prompts)
        return run_prompts(setup, prompts, run_dir, choices, on_summary)
    except KeyboardInterrupt as stop:
        raise stopped(stop, run_dir, total) from None


def stopped(stop: KeyboardInterrupt, run_dir: Path, total: int | None) -> RunStopped:
    """The one-line report of a run stopped by a signal."""
    signum = getattr(stop, "signum", signal.SIGINT)
    if total is None:
        if (run_dir / R.MANIFEST_FILE).exists():
            return RunStopped(f"stopped while loading; continue with resume={run_dir}", signum)
        return RunStopped("stopped while loading; no prompt was run", signum)
    done = len(R.finished_ids(run_dir))
    return RunStopped(
        f"stopped after {done} of {total} prompts; continue with resume={run_dir}", signum
    )


def run_prompts(
    setup: Setup,
    prompts: list[Prompt],
    run_dir: Path,
    choices: dict[str, str],
    on_summary: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Every prompt not finished yet, one line each, then the summary."""
    incomplete = run_dir / R.INCOMPLETE_FILE
    incomplete.write_text(f"run not finished; continue with resume={run_dir}\n")
    done = R.finished_ids(run_dir)
    todo = [(i, p) for i, p in enumerate(prompts) if p.id not in done]
    for index in range(min(setup.cfg.warmup_prompts, len(prompts)) if todo else 0):
        run_prompt(setup, prompts[index], index)  # warm-up: same code path, not recorded
    tracker = tracking.start(setup.cfg, run_dir, choices)
    failed = True
    try:
        meter, steps, governor = hardware.LoadMeter().start(), 0, thread_governor(setup.cfg)
        for index, prompt in tqdm(todo, desc=choices.get("method", "method"), unit="prompt"):
            threads = prompt_threads(governor, setup)
            record = safe_run_prompt(setup, prompt, index) | {"threads": threads}
            R.append_prompt(run_dir, record)
            steps += decode_steps(record)
        load = run_load(meter, steps, governor) if todo else None
        summary = finalize(setup, run_dir, on_summary, load)
        tracker.log_summary(summary, run_dir)
        failed = False
    finally:
        tracker.finish(failed=failed)
    incomplete.unlink(missing_ok=True)
    return summary


def thread_governor(cfg: DictConfig) -> hardware.ThreadGovernor | None:
    """With ``adapt_threads`` (default), torch's threads follow the cores other processes
    leave free, prompt by prompt (:class:`racer_bench.system.hardware.ThreadGovernor`)."""
    if not cfg.get("adapt_threads", True):
        return None
    return hardware.ThreadGovernor(torch.get_num_threads())


def prompt_threads(governor: hardware.ThreadGovernor | None, setup: Setup) -> int:
    """The torch threads for the next prompt (the governor's choice, else today's count), with
    the schedulers' cost curve for that count (:func:`follow_threads`)."""
    threads = governor.before_prompt() if governor else torch.get_num_threads()
    follow_threads(setup, threads)
    return threads


def follow_threads(setup: Setup, threads: int) -> None:
    """Give the schedulers the measured cost curve of the thread count the next prompt runs on.

    A curve belongs to one thread count (SmolLM2-135M, fast engine: a 12-token forward costs
    1.6 AR forwards on two threads and 2.0 on one), so when the governor takes a core away the
    scheduler cuts trees for the machine it has now instead of the one it started on. Each
    count is measured once (cached on disk like the first curve); synthetic curves and curves
    read from a file do not depend on threads and stay.
    """
    scheduled = [m for m in setup.modes if isinstance(m.scheduler, ConfidenceScheduler)]
    key = (setup.profile.meta.get("key") if setup.profile is not None else None) or {}
    if not scheduled or "threads" not in key:
        return
    setup.profiles.setdefault(int(key["threads"]), setup.profile)  # type: ignore[arg-type]
    if threads not in setup.profiles:
        settings = scheduler_settings(setup.cfg)
        profile = cost_profile(settings, setup.cfg, setup.target, scheduled[0].drafter)
        assert profile is not None
        setup.profiles[threads] = profile
    for mode in scheduled:
        mode.scheduler.profile = setup.profiles[threads]  # type: ignore[attr-defined]


def save_thread_profiles(setup: Setup, run_dir: Path) -> None:
    """``cost_profile_t<n>.json`` for each curve measured after the first (:data:`PROFILE_FILE`)."""
    for threads, profile in setup.profiles.items():
        if profile is not setup.profile:
            profile.save(run_dir / f"cost_profile_t{threads}.json")


def run_load(
    meter: hardware.LoadMeter, steps: int, governor: hardware.ThreadGovernor | None
) -> dict[str, Any]:
    """The machine's load over the timed prompts, with the threads each prompt ran with."""
    load = meter.stop(steps)
    if governor:
        load |= governor.report()
        load["warning"] = hardware.load_warning(load)
    return load


def safe_run_prompt(setup: Setup, prompt: Prompt, index: int) -> dict[str, Any]:
    """:func:`run_prompt`, with an exception recorded as a failed prompt (the run goes on)."""
    try:
        return run_prompt(setup, prompt, index)
    except (KeyboardInterrupt, ConfigError):
        raise
    except Exception as error:
        return failed_record(prompt, index, error)


def floor_block(floor: dict[str, Any] | None, ar_step_ms: float | None) -> dict[str, Any]:
    """The AR step against the weight-read floor (empty without either)."""
    if not floor or not ar_step_ms:
        return {}
    return {"floor_ms": floor["floor_ms"], "ar_step_floor_ratio": ar_step_ms / floor["floor_ms"]}


def decode_steps(record: dict[str, Any]) -> int:
    """Decode steps of every mode of one prompt record (0 for a failed prompt); ``generate()``
    (the reference) keeps no steps."""
    return sum(
        len(turn["steps"]["n_draft"])
        for name, mode in record.items()
        if name != REFERENCE and isinstance(mode, dict) and "turns" in mode
        for turn in mode["turns"]
    )


def finalize(
    setup: Setup,
    run_dir: Path,
    on_summary: Callable[[dict[str, Any]], None] | None = None,
    load: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Summarize every prompt line of the run folder (resumed parts included).

    ``load`` is the machine's load while this invocation ran its prompts
    (:class:`racer_bench.system.hardware.LoadMeter`); a run that was not alone carries a warning.
    """
    records = R.load_prompts(run_dir)
    category_of = getattr(setup.task, "report_category", lambda c: c)
    has_baseline = any(m.name == "baseline" for m in setup.modes)
    summary = summarize(records, setup.task.metric, has_baseline, category_of)
    summary["metric"] = setup.task.metric
    summary["run_dir"] = str(run_dir)
    manifest_path = run_dir / R.MANIFEST_FILE
    fingerprint = R.read_json(manifest_path).get("hardware") if manifest_path.exists() else None
    if fingerprint:
        summary["hardware"] = {"id": fingerprint.get("id"), "label": fingerprint.get("label")}
    if load is not None:
        summary["load"] = load
        summary["load_warning"] = load.get("warning")
    summary |= floor_block(setup.floor, summary.get("ar_step_ms"))
    summary["engine"] = setup.target.engine
    summary["dtype"] = str(setup.target.dtype).removeprefix("torch.")
    R.write_json(run_dir / R.SUMMARY_FILE, summary)
    save_thread_profiles(setup, run_dir)
    if on_summary:
        on_summary(summary)
    return summary
