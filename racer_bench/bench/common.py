"""Interleaved speed comparisons in one process: our loop vs transformers ``generate``.

Used by ``scripts/bench_baseline.py`` and ``scripts/bench_methods.py``. Every contender runs on
the same prompt back to back before the next prompt starts, so machine noise hits all alike;
the order of contenders rotates with the prompt index.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from racer_bench.analysis import metrics
from racer_bench.config.construct import constructor_node
from racer_bench.config.paths import CONF_DIR, REPO_ROOT
from racer_bench.engine.decode import LoopOptions, generate
from racer_bench.engine.drafter import Drafter
from racer_bench.engine.fast import kernel_library
from racer_bench.engine.schedule.scheduler import Scheduler
from racer_bench.engine.stopping import StopRule
from racer_bench.engine.target import HFTarget
from racer_bench.engine.verify.greedy import GreedyVerifier
from racer_bench.models.loaders import load_smollm2
from racer_bench.record import folder as run_records
from racer_bench.run import resolvers
from racer_bench.run.config import scheduler_settings
from racer_bench.run.reference import hf_generate
from racer_bench.run.setup import cost_profile
from racer_bench.system import hardware
from racer_bench.tasks.humaneval import HumanEvalTask

MODE = "method"  # the mode a contender's prompts are recorded under for analysis/metrics.py


@dataclass
class ContenderTally:
    """Per-contender prompts, as records that :mod:`racer_bench.analysis.metrics` measures."""

    records: list[metrics.Record] = field(default_factory=list)
    outputs: list[list[int]] = field(default_factory=list)

    def add(self, tokens: list[int], seconds: float, steps: Sequence[Any]) -> None:
        """One prompt: its tokens, wall seconds and decode steps (none for ``generate``)."""
        self.outputs.append(tokens)
        self.records.append({MODE: {"turns": [turn(tokens, seconds, steps)]}})

    @property
    def tokens(self) -> int:
        return sum(metrics.new_tokens(r, MODE) for r in self.records)

    @property
    def seconds(self) -> float:
        return sum(metrics.wall_time(r, MODE) for r in self.records)

    @property
    def steps(self) -> int:
        return sum(len(metrics.step_column(r, MODE, "n_committed")) for r in self.records)

    @property
    def tokens_per_s(self) -> float:
        return metrics.tokens_per_s(self.records, MODE)

    @property
    def mean_accepted(self) -> float:
        """MAT (:func:`racer_bench.analysis.metrics.mat`)."""
        return metrics.mat(self.records, MODE)

    @property
    def retrieval_hit_rate(self) -> float:
        return metrics.retrieval_hit_rate(self.records, MODE)

    @property
    def draft_share(self) -> float:
        """Drafting + update time / wall time; NaN for a contender without decode steps."""
        return metrics.draft_time_share(self.records, MODE) if self.steps else float("nan")


def turn(tokens: list[int], seconds: float, steps: Sequence[Any]) -> dict[str, Any]:
    """A one-turn record of a timed generation: all of it counted as decode time."""
    columns = {
        "n_committed": [s.n_committed for s in steps],
        "t_draft": [s.t_draft for s in steps],
        "t_update": [s.t_update for s in steps],
        "has_retrieval": [int(s.has_retrieval) for s in steps],
    }
    return run_records.turn_record(tokens, "", None, decode_time=seconds, steps=columns)


Runner = Callable[[list[int]], tuple[list[int], float, list[Any]]]
Result = TypeVar("Result")  # what a timed measurement returns


def loop_runner(
    target: HFTarget, drafter: Drafter, max_new_tokens: int, scheduler: Scheduler | None = None
) -> Runner:
    """Our decode loop with a drafter (and scheduler), greedy; returns (tokens, seconds, steps)."""

    def run(ids: list[int]) -> tuple[list[int], float, list[Any]]:
        stop = StopRule(target.eos_ids, max_new_tokens)
        result = generate(target, drafter, GreedyVerifier(), ids, stop, torch.Generator(),
                          LoopOptions(), scheduler=scheduler)  # fmt: skip
        return result.tokens, result.wall_time, result.steps

    return run


def hf_runner(target: HFTarget, max_new_tokens: int, **generate_kwargs: Any) -> Runner:
    """transformers ``generate(do_sample=False, **generate_kwargs)``, timed the same way."""

    def run(ids: list[int]) -> tuple[list[int], float, list[Any]]:
        tokens, seconds = hf_generate(target, ids, max_new_tokens, **generate_kwargs)
        return tokens, seconds, []

    return run


def group_overrides(overrides: Sequence[str]) -> list[str]:
    """A contender's overrides as config overrides: ``scheduler=...`` and ``scheduler.<key>=...``
    go to the scheduler group, the rest under ``method.``.

    A contender that names no scheduler gets ``scheduler=fixed``, not the CLI's ``auto``: a bench
    script's ``racer`` is the draft its YAML sizes, so the committed bench records (all made that
    way) keep reproducing; ``racer@scheduler=auto`` is what the CLI runs by default.
    """
    top = [o for o in overrides if o.split("=")[0].split(".")[0] == "scheduler"]
    group = [] if any(o.startswith("scheduler=") for o in top) else ["scheduler=fixed"]
    return [*group, *top, *(f"method.{o}" for o in overrides if o not in top)]


def method_setup(
    method: str, target: HFTarget, overrides: Sequence[str] = ()
) -> tuple[Drafter, Scheduler]:
    """A drafter from ``conf/method/<method>.yaml`` and its scheduler.

    ``scheduler=...`` and ``scheduler.<key>=...`` overrides go to the scheduler group (e.g.
    ``scheduler=confidence``, which also sizes the candidates); the rest to the method.
    """
    resolvers.register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", [f"method={method}", *group_overrides(overrides)])
    drafter = instantiate(constructor_node(cfg.method))(vocab_size=target.vocab_size)
    settings = scheduler_settings(cfg)
    return drafter, settings.make(cost_profile(settings, cfg, target, drafter))


def interleave(
    runners: dict[str, Runner],
    prompts: Sequence[list[int]],
    progress: bool = True,
    on_prompt: Callable[[dict[str, ContenderTally], int], None] | None = None,
) -> dict[str, ContenderTally]:
    """Run every contender on every prompt, rotating the order; return the totals.

    ``on_prompt(tallies, n_done)`` runs after each prompt (e.g. to save a partial table).
    """
    from tqdm.auto import tqdm

    tallies = {name: ContenderTally() for name in runners}
    names = list(runners)
    for index, ids in enumerate(tqdm(prompts, disable=not progress, unit="prompt")):
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            tallies[name].add(*runners[name](ids))
        if on_prompt:
            on_prompt(tallies, index + 1)
    return tallies


def identical_count(tally: ContenderTally, reference: ContenderTally) -> int:
    """Prompts whose output equals the reference's, token for token."""
    return sum(a == b for a, b in zip(tally.outputs, reference.outputs, strict=True))


def humaneval_prompts(target: HFTarget, limit: int | None, style: str = "chat") -> list[list[int]]:
    """The first ``limit`` HumanEval prompts (None: all) for ``target``, ``chat`` or
    ``completion`` style."""
    task = HumanEvalTask(limit=limit, prompt_style=style)
    return [task.render(p, 0, [], target.tokenizer) for p in task.load()]


def humaneval_context(target: HFTarget, length: int | None) -> list[int]:
    """One HumanEval prompt (``length`` None), or the first ``length`` tokens of HumanEval
    prompts one after another: a prefix of a chosen length for forward-cost measurements."""
    if length is None:
        return humaneval_prompts(target, 1)[0]
    tokens = [t for prompt in humaneval_prompts(target, None) for t in prompt]
    if len(tokens) < length:
        raise SystemExit(f"a context of {length} tokens: HumanEval has only {len(tokens)}")
    return tokens[:length]


def markdown_table(tallies: dict[str, ContenderTally], base: str, reference: str) -> str:
    """Speed, speedup over ``base``, MAT, retrieval hit rate, draft share, identical outputs."""
    n = len(tallies[base].outputs)
    lines = [
        f"| contender | tok/s | speedup vs {base} | MAT | retrieval hit | draft+update share "
        f"| identical to {reference} |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, t in tallies.items():
        hit, share = t.retrieval_hit_rate, t.draft_share
        same = identical_count(t, tallies[reference])
        lines.append(
            f"| {name} | {t.tokens_per_s:.2f} | {t.tokens_per_s / tallies[base].tokens_per_s:.2f}x "
            f"| {t.mean_accepted:.2f} | {hit:.1%} | {share:.1%} | {same}/{n} |"
        )
    return "\n".join(lines).replace("nan%", "-").replace("nan", "-")


def totals(tallies: dict[str, ContenderTally]) -> dict[str, dict[str, Any]]:
    """Per-contender tokens, seconds, MAT and steps (JSON-ready)."""
    return {
        name: {"tokens": t.tokens, "seconds": t.seconds, "mat": t.mean_accepted, "steps": t.steps}
        for name, t in tallies.items()
    }


@functools.cache
def code_state() -> dict[str, Any]:
    """The git sha and dirty flag of the code a bench script runs, read once, at the first call.

    Bench scripts write their tables into tracked files (docs/bench/) as they go, so the state
    read after the first write would call every such record dirty: they call this before.
    """
    return run_records.git_state(REPO_ROOT)


def start_kernel_bench(threads: int | None) -> None:
    """What a script timing our C kernels does first: read the code state before it writes its
    tracked outputs, stop with one line where the kernels cannot be built, set the threads."""
    code_state()
    if kernel_library.unavailable_reason() is not None:
        raise SystemExit(f"no kernels here: {kernel_library.unavailable_reason()}")
    if threads:
        torch.set_num_threads(threads)


def timed_alone(measure: Callable[[], Result]) -> tuple[Result, dict[str, Any]]:
    """``measure()``'s result and the machine's load while it ran (a hardware.LoadMeter)."""
    meter = hardware.LoadMeter().start()
    result = measure()
    return result, meter.stop()


def report_text(header: str, load: dict[str, Any] | None, body: str) -> str:
    """What a bench script prints and writes as Markdown: its header line, the setting line
    (machine, threads, load warning), a blank line, the table."""
    return "\n".join([header, setting_line(load) + "\n", body])


def write_report(out: str, text: str, record: dict[str, Any]) -> None:
    """``<out>.md`` (the text) and ``<out>.json`` (the record)."""
    path = Path(out)
    path.with_suffix(".md").write_text(text + "\n")
    path.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")


def fast_smollm2(cache_dir: str, dtype: str) -> HFTarget:
    """SmolLM2 at ``dtype`` on the fast engine, for a script timing our kernels; stops with one
    line where its native layer forward is off."""
    target = load_smollm2(cache_dir, dtype=dtype)
    target.set_engine("fast")
    if target.layer_stack is None:
        raise SystemExit("the layer stack is off here (see the engine's record)")
    return target


def bench_record(
    tallies: dict[str, ContenderTally],
    load: dict[str, Any] | None,
    engine: str | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """What a bench script writes as JSON: where it ran (hardware fingerprint, git state, engine),
    the machine's load over the timed part, the settings and the per-contender totals."""
    return {
        "hardware": hardware.fingerprint(torch.get_num_threads()),
        **code_state(),
        "engine": engine,
        "load": load,
        "settings": settings,
        "contenders": totals(tallies),
    }


def setting_line(load: dict[str, Any] | None = None) -> str:
    """``measured on <fingerprint label> (hardware id ...)``, plus the load warning if any."""
    fp = hardware.fingerprint(torch.get_num_threads())
    line = f"measured on {fp['label']} (hardware id {fp['id']}), {fp['threads']} threads"
    warning = (load or {}).get("warning")
    return f"{line}; WARNING: {warning}" if warning else line
