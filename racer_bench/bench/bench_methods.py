"""Every method against our AR loop and transformers' references (``scripts/bench_methods.py``):
contenders from their specs, the runners of one comparison, and its table and record.

A contender is ``<method>`` or ``<method>@key=value+key=value`` (overrides of
``conf/method/<method>.yaml``; ``scheduler=confidence`` and ``scheduler.<key>=value`` set the
scheduler instead). Our loop runs on the chosen engine; the transformers contenders
(``generate()``, prompt lookup) always run on a separate, untouched eager copy of the model, and
``ar_eager`` is our AR loop on that copy, so engine gains show up against both.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from racer_bench.bench.common import (
    ContenderTally,
    Runner,
    bench_record,
    hf_runner,
    loop_runner,
    markdown_table,
    method_setup,
    setting_line,
)
from racer_bench.engine.drafter import Drafter, NullDrafter
from racer_bench.engine.schedule.scheduler import Scheduler
from racer_bench.engine.target import HFTarget
from racer_bench.system.hardware import LoadMeter


def contender(spec: str, target: HFTarget) -> tuple[Drafter, Scheduler]:
    """``racer@capacity=16+scheduler=confidence`` -> (drafter, scheduler) with those overrides.

    Environment variables in the overrides (``checkpoint=$C/dspark.pt``, quoted in the shell)
    are expanded here, so the table names the contender without a machine path."""
    method, _, rest = spec.partition("@")
    overrides = [os.path.expandvars(o) for o in rest.split("+") if o]
    return method_setup(method, target, overrides)


@dataclass
class References:
    """Which references run beside our loop's AR and methods."""

    eager_ar: bool = False  # our AR loop on the eager copy (``ar_eager``)
    hf_generate: bool = False  # transformers ``generate()``
    hf_prompt_lookup: bool = True  # transformers ``generate(prompt_lookup_num_tokens=10)``


def contender_runners(
    target: HFTarget,
    engine: str,
    load_eager: Callable[[], HFTarget],
    methods: list[str],
    max_new_tokens: int,
    references: References,
) -> dict[str, Runner]:
    """Our AR loop, the references asked for (on an eager copy of the model loaded by
    ``load_eager`` unless ``target`` runs the eager engine) and every method contender."""
    n = max_new_tokens
    runners: dict[str, Runner] = {"ar": loop_runner(target, NullDrafter(), n)}
    refs = references
    if refs.hf_generate or refs.hf_prompt_lookup or refs.eager_ar:
        eager = load_eager() if engine != "eager" else target
        if refs.eager_ar and engine != "eager":
            runners["ar_eager"] = loop_runner(eager, NullDrafter(), n)
        if refs.hf_generate:
            runners["hf_generate"] = hf_runner(eager, n)
        if refs.hf_prompt_lookup:
            runners["hf_prompt_lookup"] = hf_runner(eager, n, prompt_lookup_num_tokens=10)
    for spec in methods:
        drafter, scheduler = contender(spec, target)
        runners[spec] = loop_runner(target, drafter, n, scheduler)
    return runners


def ratio_lines(tallies: dict[str, ContenderTally], methods: list[str]) -> list[str]:
    """Throughput ratios against the outside references that ran."""
    speed = {name: t.tokens_per_s for name, t in tallies.items()}
    lines = []
    if "ar_eager" in speed:
        lines.append(f"our AR, engine / eager engine: {speed['ar'] / speed['ar_eager']:.3f}x")
    for ref, label in (("hf_generate", "transformers generate()"),
                       ("hf_prompt_lookup", "transformers prompt lookup")):  # fmt: skip
        if ref not in speed:
            continue
        mine = ["ar", "ar_eager"] if ref == "hf_generate" else []
        for name in [*mine, *methods]:
            if name in speed:
                lines.append(f"{name} / {label}: {speed[name] / speed[ref]:.3f}x")
        if ref == "hf_generate" and "hf_prompt_lookup" in speed:
            ratio = speed["hf_prompt_lookup"] / speed[ref]
            lines.append(f"transformers prompt lookup / {label}: {ratio:.3f}x")
    return lines


@dataclass
class Report:
    """The comparison's table, printed at the end and, with ``out``, saved after every prompt
    (a stopped run keeps its finished prompts) with the totals as JSON. Made when the timed
    part begins: its clock and the machine's load meter start then."""

    prompt_style: str
    max_new_tokens: int
    methods: list[str]
    choice: dict[str, Any]  # the engine choice: "chosen" engine, "dtype", and why
    out: str | None = None
    start: float = field(default_factory=time.time)
    meter: LoadMeter = field(default_factory=lambda: LoadMeter().start())

    def load(self, tallies: dict[str, ContenderTally]) -> dict:
        """The machine's load since the timed part began (every contender's steps)."""
        return self.meter.stop(sum(t.steps for t in tallies.values()))

    def render(self, tallies: dict[str, ContenderTally], done: int) -> str:
        """Settings, machine and load, the table and the ratios to the references."""
        header = (
            f"smollm2_135m, greedy, HumanEval first {done} ({self.prompt_style} prompts), "
            f"max_new_tokens {self.max_new_tokens}, {torch.get_num_threads()} CPU threads, our "
            f"loop on the {self.choice['chosen']} engine at {self.choice['dtype']}, "
            f"{time.time() - self.start:.0f} s"
        )
        table = markdown_table(tallies, base="ar", reference="ar")
        lines = ratio_lines(tallies, self.methods)
        return "\n".join([header, setting_line(self.load(tallies)), "", table, "", *lines])

    def save(self, tallies: dict[str, ContenderTally], done: int) -> None:
        """The table so far and the totals (nothing without ``out``)."""
        if not self.out:
            return
        out = Path(self.out).with_suffix(".md")
        out.write_text(self.render(tallies, done) + "\n")
        record = bench_record(tallies, self.load(tallies), self.choice["chosen"], prompts=done,
                              max_new_tokens=self.max_new_tokens,
                              prompt_style=self.prompt_style, methods=self.methods,
                              engine_choice=self.choice)  # fmt: skip
        out.with_suffix(".json").write_text(json.dumps(record, indent=2))
