"""Replay recorded runs (:mod:`racer_bench.replay.core`): their turns rebuilt from the
records, every drafter fresh per run, tallies of MAT per run and drafter, and the agreement of
drafts at every output position.

Records come from run folders (``prompts.jsonl`` + ``manifest.json``); prompt ids are rebuilt
with the run's task and tokenizer from the baseline (autoregressive) outputs, so the task's
data folder and the cached model folder must exist.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from racer_bench.config.construct import DISPLAY_KEYS
from racer_bench.config.paths import DEFAULT_MODELS_DIR
from racer_bench.replay.core import (
    BIG_BUDGET,
    Replayable,
    Step,
    accepted_path,
    prune_lists,
    replay,
    replay_mat,
)
from racer_bench.replay.drafters import Options, ProjectDrafter, make_drafter
from racer_bench.replay.recorded import ReplayRun, Turn

ModelFiles = Callable[[Path], tuple[Any, int]]  # model folder -> (tokenizer, vocabulary size)


def load_run(
    folder: Path, data_dir: str | None, open_model: ModelFiles, batch_size: int = 1
) -> ReplayRun:
    """A run folder; of a vLLM run (a record per prompt and batch size), the records of
    ``batch_size``. ``open_model`` reads the tokenizer and vocabulary of the cached model."""
    from hydra.utils import instantiate

    manifest = json.loads((folder / "manifest.json").read_text())
    records = [json.loads(line) for line in (folder / "prompts.jsonl").read_text().splitlines()]
    records = [r for r in records if r.get("batch_size", batch_size) == batch_size]
    config = manifest["config"]
    task_cfg = {k: v for k, v in config["task"].items() if k not in DISPLAY_KEYS}
    if task_cfg.get("data_dir") == "<data_dir>":
        task_cfg["data_dir"] = data_dir or os.environ.get("RACER_BENCH_DATA") or "data"
    task = instantiate(task_cfg)
    model = config["model"]
    models_dir = Path(str(model.get("cache_dir", DEFAULT_MODELS_DIR))).expanduser()
    name = str(model.get("name") or manifest.get("model") or "smollm2_135m")
    if not (models_dir / name).is_dir():
        sys.exit(f"{folder}: model folder {models_dir / name} missing (run the benchmark once)")
    tokenizer, vocab = open_model(models_dir / name)
    return ReplayRun(folder, manifest, records, tokenizer, vocab, task)


@dataclass
class ReplayTally:
    """Steps and committed tokens of one drafter over the measured turns."""

    steps: int = 0
    tokens: int = 0
    prompt_mats: list[float] = field(default_factory=list)

    def add(self, steps: Sequence[Step]) -> None:
        self.steps += len(steps)
        self.tokens += sum(s.committed for s in steps)

    @property
    def tokens_per_step(self) -> float:
        """MAT over every replayed step."""
        return self.tokens / self.steps if self.steps else float("nan")


def simulate(
    runs: Sequence[ReplayRun], names: Sequence[str], opts: Options,
    project: Mapping[str, ProjectDrafter], warmup: int | None,
    per_prompt: Callable[[str], None] | None = None, agreement: bool = False,
) -> dict[str, dict[str, ReplayTally]]:  # fmt: skip
    """{run name: {drafter: tally}}; each drafter is fresh per run (prompt order kept).

    ``project`` makes this project's drafters by name (:func:`make_drafter`); ``warmup``
    None: each run's own ``warmup_prompts``."""
    out: dict[str, dict[str, ReplayTally]] = {}
    for run in runs:
        drafters = {n: make_drafter(n, opts, run, project) for n in names}
        tallies = {n: ReplayTally() for n in names}
        agree = AgreementTally(names) if agreement else None
        n_warm = int(run.manifest["config"].get("warmup_prompts", 0)) if warmup is None else warmup
        for k, turn in enumerate(run.turns(n_warm)):
            measured = k >= n_warm_turns(run, n_warm)
            if agree is not None:
                agree.visit(drafters, turn, run.max_new_tokens, count=measured)
                continue
            row = []
            for n, d in drafters.items():
                steps = replay(d, turn.prompt, turn.output, run.max_new_tokens, run.budget)
                if n == "recorded" and turn.recorded and measured:
                    got = [s.committed for s in steps]
                    if got != turn.recorded:
                        print(f"  recorded mismatch {turn.id} turn {turn.turn}: replayed "
                              f"{sum(got)}/{len(got)} vs recorded "
                              f"{sum(turn.recorded)}/{len(turn.recorded)}")  # fmt: skip
                if measured:
                    tallies[n].add(steps)
                    row.append(f"{n} {replay_mat(steps):.3f} ({len(steps)} steps)")
            if per_prompt is not None and measured:
                per_prompt(f"  {run.name} {turn.id} t{turn.turn} len {len(turn.output)}: "
                           + ", ".join(row))  # fmt: skip
        if agree is not None:
            agree.report(run.name)
        out[run.name] = tallies
    return out


def n_warm_turns(run: ReplayRun, warmup: int) -> int:
    ok = [r for r in run.records if r.get("status") == "ok"]
    return sum(len(r["baseline"]["turns"]) for r in ok[:warmup])


class AgreementTally:
    """Drafts at every output position: equal to the first drafter's, and equal acceptance."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        self.positions = 0
        self.same_draft = dict.fromkeys(names[1:], 0)
        self.same_accept = dict.fromkeys(names[1:], 0)

    def visit(self, drafters: dict[str, Replayable], turn: Turn, max_new: int, count: bool) -> None:
        for d in drafters.values():
            d.start(list(turn.prompt))
        for pos in range(1, len(turn.output)):
            context = [*turn.prompt, *turn.output[:pos]]
            max_depth = max(max_new - pos - 1, 0)
            left = turn.output[pos:]
            got = {}
            for n, d in drafters.items():
                draft = prune_lists(*d.draft(context, max_depth), BIG_BUDGET, max_depth)
                tokens, parents = draft.tokens.tolist(), draft.parents.tolist()
                got[n] = (tokens, parents, len(accepted_path(tokens, parents, left)))
            for d in drafters.values():
                d.commit(left[:1], [])
            if not count:
                continue
            self.positions += 1
            first = got[self.names[0]]
            for n in self.names[1:]:
                self.same_draft[n] += got[n][:2] == first[:2]
                self.same_accept[n] += got[n][2] == first[2]

    def report(self, run: str) -> None:
        for n in self.names[1:]:
            print(f"{run}: {n} vs {self.names[0]}: same draft at {self.same_draft[n]}/"
                  f"{self.positions} positions, same accepted length at "
                  f"{self.same_accept[n]}/{self.positions}")  # fmt: skip


def print_table(results: dict[str, dict[str, ReplayTally]], names: Sequence[str]) -> None:
    head = "| run | " + " | ".join(f"{n} MAT" for n in names)
    ratios = [f"{names[0]} / {n}" for n in names[1:]]
    print(head + "".join(f" | {r}" for r in ratios) + " |")
    print("|---" * (1 + len(names) + len(ratios)) + "|")
    total = {n: ReplayTally() for n in names}
    for run, tallies in [*results.items(), ("all", total)]:
        if run != "all":
            for n in names:
                total[n].steps += tallies[n].steps
                total[n].tokens += tallies[n].tokens
        cells = [f"{tallies[n].tokens_per_step:.3f}" for n in names]
        cells += [
            f"{tallies[names[0]].tokens_per_step / tallies[n].tokens_per_step:.4f}"
            for n in names[1:]
        ]
        print(f"| {run} | " + " | ".join(cells) + " |")
