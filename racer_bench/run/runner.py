"""``run(cfg, run_dir)``: one benchmark run, AR baseline and method interleaved per prompt."""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig
from tqdm.auto import tqdm

from racer_bench.analysis import tracking
from racer_bench.analysis.summary import summarize
from racer_bench.errors import ConfigError, RunStopped
from racer_bench.record import folder as run_records
from racer_bench.run import resume, runlock
from racer_bench.run.config import validate
from racer_bench.run.curves import save_followed, save_thread_profiles
from racer_bench.run.manifest import run_manifest
from racer_bench.run.prompt import decode_steps, run_prompt, safe_run_prompt
from racer_bench.run.setup import PROFILE_FILE, Setup, build
from racer_bench.run.threads import prompt_threads, run_load, thread_governor
from racer_bench.system import hardware, interrupts
from racer_bench.tasks.base import Prompt


def native_manifest(setup: Setup, choices: dict[str, str]) -> dict[str, Any]:
    """The run's manifest with what our own loop adds: device, engine and its choice, the
    weight-read floor, threads and the scheduler."""
    method = next(m for m in setup.modes if m.name == "method")
    profile = setup.profile
    return run_manifest(
        setup.cfg, choices, setup.target, method.drafter, setup.task, setup.max_new_tokens,
        lossless=bool(method.verifier.lossless),
        device=run_records.device_name(setup.target.device),
        engine=setup.target.engine_details,
        engine_choice=setup.engine_choice,
        floor=setup.floor,
        threads=torch.get_num_threads(),
        scheduler=scheduler_name(choices.get("scheduler"), method.scheduler),
        scheduler_persist_across_prompts=bool(method.scheduler.persist_across_prompts),
        cost_profile=None
        if profile is None
        else {"file": PROFILE_FILE, "source": profile.meta.get("source")},
        deterministic=torch.are_deterministic_algorithms_enabled(),
        **reference_fields(setup),
    )  # fmt: skip


def reference_fields(setup: Setup) -> dict[str, Any]:
    """``references``: what each reference other than generate() is (none: no key)."""
    if not setup.references:
        return {}
    return {"references": {r.key: r.details() for r in setup.references}}


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
    validate(cfg)  # the run's one check, before its folder is touched (build does not repeat it)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with runlock.hold(run_dir), interrupts.sigterm_as_interrupt():
        if resumed is None and _holds_run(run_dir):
            raise ConfigError(f"{run_dir} already holds a run; continue it with resume={run_dir} "
                              "or write to another folder")  # fmt: skip
        if resumed is not None and resume.is_finished(run_dir):
            print(f"run folder {run_dir} is already finished; nothing to resume")
            return run_records.read_json(run_dir / run_records.SUMMARY_FILE)
        return _run_in(cfg, run_dir, choices, on_summary, resumed)


def _holds_run(run_dir: Path) -> bool:
    return any(
        (run_dir / name).exists() for name in (run_records.MANIFEST_FILE, run_records.PROMPTS_FILE)
    )


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
            run_records.write_json(
                run_dir / run_records.MANIFEST_FILE, native_manifest(setup, choices)
            )
        else:
            torn = run_records.drop_torn_tail(run_dir)
            if torn is not None:
                print(f"dropped a torn last line of {run_records.PROMPTS_FILE} (kept in {torn}); "
                      "that prompt is redone")  # fmt: skip
            device = run_records.device_name(setup.target.device)
            resume.record_event(
                run_dir, resumed.changed, device, len(run_records.finished_ids(run_dir))
            )
        with setup.startup.phase("prompts"):
            prompts = setup.task.load()
        total = len(prompts)
        return run_prompts(setup, prompts, run_dir, choices, on_summary)
    except KeyboardInterrupt as stop:
        raise stopped(stop, run_dir, total) from None


def stopped(stop: KeyboardInterrupt, run_dir: Path, total: int | None) -> RunStopped:
    """The one-line report of a run stopped by a signal."""
    signum = getattr(stop, "signum", signal.SIGINT)
    if total is None:
        if (run_dir / run_records.MANIFEST_FILE).exists():
            return RunStopped(f"stopped while loading; continue with resume={run_dir}", signum)
        return RunStopped("stopped while loading; no prompt was run", signum)
    done = len(run_records.finished_ids(run_dir))
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
    incomplete = run_dir / run_records.INCOMPLETE_FILE
    incomplete.write_text(f"run not finished; continue with resume={run_dir}\n")
    todo = prompts_to_run(
        prompts, int(setup.cfg.get("repeats", 1)), run_records.finished_ids(run_dir)
    )
    warm_up(setup, prompts, bool(todo))
    tracker = tracking.start(setup.cfg, run_dir, choices)
    failed = True
    try:
        meter, steps, governor = hardware.LoadMeter().start(), 0, thread_governor(setup.cfg)
        for repeat, index, prompt in tqdm(todo, desc=choices.get("method", "method"),
                                          unit="prompt"):  # fmt: skip
            threads = prompt_threads(governor, setup)
            record = safe_run_prompt(setup, prompt, index, repeat) | {"threads": threads}
            run_records.append_prompt(run_dir, record)
            steps += decode_steps(record)
        load = run_load(meter, steps, governor) if todo else None
        summary = finalize(setup, run_dir, on_summary, load)
        tracker.log_summary(summary, run_dir)
        failed = False
    finally:
        tracker.finish(failed=failed)
    incomplete.unlink(missing_ok=True)
    return summary


def warm_up(setup: Setup, prompts: list[Prompt], any_todo: bool) -> None:
    """Mark the run ready, then run the warm-up prompts (same code path, not recorded; none
    when nothing is left to do), timed into ``setup.startup``."""
    setup.startup.ready()
    with setup.startup.warmup():
        for index in range(min(setup.cfg.warmup_prompts, len(prompts)) if any_todo else 0):
            run_prompt(setup, prompts[index], index)


def prompts_to_run(
    prompts: list[Prompt], repeats: int, done: set[str]
) -> list[tuple[int, int, Prompt]]:
    """``(repeat, index, prompt)`` not finished yet, repeat-major: every prompt once, then
    again, so the repeats of a prompt lie minutes apart, as separate runs would."""
    return [
        (repeat, index, prompt)
        for repeat in range(repeats)
        for index, prompt in enumerate(prompts)
        if run_records.repeat_id(prompt.id, repeat) not in done
    ]


def floor_block(floor: dict[str, Any] | None, ar_step_ms: float | None) -> dict[str, Any]:
    """The AR step against the weight-read floor (empty without either)."""
    if not floor or not ar_step_ms:
        return {}
    return {"floor_ms": floor["floor_ms"], "ar_step_floor_ratio": ar_step_ms / floor["floor_ms"]}


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
    records = run_records.load_prompts(run_dir)
    category_of = getattr(setup.task, "report_category", lambda c: c)
    has_baseline = any(m.name == "baseline" for m in setup.modes)
    summary = summarize(records, setup.task.metric, has_baseline, category_of)
    summary["metric"] = setup.task.metric
    summary["run_dir"] = str(run_dir)
    manifest_path = run_dir / run_records.MANIFEST_FILE
    fingerprint = (
        run_records.read_json(manifest_path).get("hardware") if manifest_path.exists() else None
    )
    if fingerprint:
        summary["hardware"] = {"id": fingerprint.get("id"), "label": fingerprint.get("label")}
    if load is not None:
        summary["load"] = load
        summary["load_warning"] = load.get("warning")
    summary |= floor_block(setup.floor, summary.get("ar_step_ms"))
    summary["engine"] = setup.target.engine
    summary["dtype"] = str(setup.target.dtype).removeprefix("torch.")
    summary["startup"] = setup.startup.to_dict()  # this invocation's (a resumed run: its own)
    summary["cost_followed"] = save_followed(setup, run_dir) or None
    run_records.write_json(run_dir / run_records.SUMMARY_FILE, summary)
    save_thread_profiles(setup, run_dir)
    if on_summary:
        on_summary(summary)
    return summary


def scheduler_name(choice: str | None, scheduler: Any) -> str:
    """The manifest's ``scheduler``: the YAML chosen, or for ``auto`` the scheduler it picked
    (tables group runs by it; ``choices.scheduler`` keeps ``auto``)."""
    return scheduler.name if choice in (None, "auto") else choice
