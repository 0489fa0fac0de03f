"""One sitting: every contender of a table in one process, prompt by prompt.

A table made cell by cell compares its rows across sittings, and the machine moves between
them (the host's memory state changes the AR step from minute to minute,
docs/bench/cost_drift_epyc_avx512bf16.md). In a sitting, each prompt runs the shared AR
baseline, an A/A contender (a second AR run: the table's own noise floor) and every cell's
method back to back, in an order that rotates with the prompt (:func:`rotated`), so every
contender meets every machine state alike. Cells that share the model, the task and the decode
settings form one group; a table whose cells differ there (racer_main's three tasks) runs its
groups one after another in the same sitting: split by prompt, never by contender.

Each cell is written as an ordinary run folder (manifest, ``prompts.jsonl`` with the shared
baseline record as its ``baseline``, summary), so the tables and figures read a sitting's
folders as they read a cell-by-cell table; the A/A contender is the cell ``ar``
(``method=ar``), the row :mod:`racer_bench.analysis.tables.noise` reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from racer_bench.analysis.tables.noise import AA_METHOD
from racer_bench.config.construct import construct
from racer_bench.errors import ConfigError
from racer_bench.record import folder as records
from racer_bench.run import runlock
from racer_bench.run.config import scheduler_settings, validate
from racer_bench.run.grid import compose_run
from racer_bench.run.prompt import decode_steps, safe_run_prompt
from racer_bench.run.runner import finalize, native_manifest, warm_up
from racer_bench.run.setup import Mode, Setup, build, cost_profile
from racer_bench.run.threads import prompt_threads, run_load, thread_governor
from racer_bench.system import hardware

AA_CELL = AA_METHOD  # the A/A contender: AR against the shared AR baseline
# what the cells of one group share: one target, one task, one decode budget
SHARED_KEYS = ("model", "task", "engine", "max_new_tokens", "max_draft", "seed", "num_threads",
               "hardware", "warmup_prompts", "repeats", "baseline")  # fmt: skip


@dataclass(frozen=True)
class SittingCell:
    """A contender: its folder name and the overrides that make its run config."""

    name: str
    overrides: tuple[str, ...]


def shared_part(cfg: DictConfig) -> dict[str, Any]:
    """The keys a group's cells must agree on, resolved."""
    return {k: OmegaConf.to_container(cfg, resolve=True).get(k) for k in SHARED_KEYS}


def groups_of(
    cells: Sequence[SittingCell],
) -> list[list[tuple[SittingCell, DictConfig, dict[str, str]]]]:
    """Cells composed and grouped by what they share (first appearance order); each group
    has an A/A cell (``method=ar`` added with the group's own overrides when none is listed)."""
    grouped: dict[str, list[tuple[SittingCell, DictConfig, dict[str, str]]]] = {}
    for cell in cells:
        cfg, choices = compose_run(cell.overrides)
        validate(cfg)
        key = yaml.safe_dump(shared_part(cfg), sort_keys=True)
        grouped.setdefault(key, []).append((cell, cfg, choices))
    for members in grouped.values():
        if not any(choices.get("method") == AA_CELL for _, _, choices in members):
            first = members[0][0]
            name = "_".join([AA_CELL, *first.name.split("_")[1:]]) if "_" in first.name else AA_CELL
            aa = SittingCell(name, (*first.overrides, f"method={AA_CELL}"))
            cfg, choices = compose_run(aa.overrides)
            members.insert(0, (aa, cfg, choices))
    return list(grouped.values())


def contender_mode(cell: SittingCell, cfg: DictConfig, shared: Setup) -> tuple[Mode, Any]:
    """The cell's method on the shared target, with its own scheduler and cost curve."""
    verifier = construct(cfg.verifier, "verifier")
    if not verifier.lossless:
        raise ConfigError(f"{cell.name}: verifier={verifier.name} is lossy; a sitting runs "
                          "lossless contenders (ASD grids: scripts/asd_grid.py)")  # fmt: skip
    drafter = construct(cfg.method, "method", vocab_size=shared.target.vocab_size)
    settings = scheduler_settings(cfg)
    profile = cost_profile(settings, cfg, shared.target, drafter)
    return Mode(cell.name, drafter, verifier, settings.make(profile)), profile


def build_group(
    members: list[tuple[SittingCell, DictConfig, dict[str, str]]],
) -> tuple[Setup, list[Setup]]:
    """One setup holding the baseline and every contender, and each cell's view of it (its
    own config, the baseline and its method as ``method``) for its run folder."""
    first_cfg = members[0][1]
    shared = build(first_cfg)
    baseline = next(m for m in shared.modes if m.name == "baseline")
    modes, views = [baseline], []
    for cell, cfg, _ in members:
        mode, profile = contender_mode(cell, cfg, shared)
        modes.append(mode)
        method = replace(mode, name="method")
        views.append(replace(shared, cfg=cfg, modes=[baseline, method], profile=profile))
    return replace(shared, modes=modes), views


def split_record(record: dict[str, Any], name: str) -> dict[str, Any]:
    """One cell's prompt line: the shared baseline and the cell's own run as ``method``."""
    if record.get("status") != "ok":
        return record
    keys = ("id", "category", "index", "status", "baseline", "baseline_score", "threads")
    own = {"method": record[name], "score": record[f"{name}_score"]}
    base = [t["tokens"] for t in record["baseline"]["turns"]]
    own["identical"] = [t["tokens"] for t in record[name]["turns"]] == base
    return {**{k: record[k] for k in keys if k in record}, **own}


def run_sitting(cells: Sequence[SittingCell], out_dir: Path) -> dict[str, dict[str, Any]]:
    """Every cell's run folder under ``out_dir`` (``<cell>/``), group by group; returns each
    cell's summary by name. Finished prompts are not redone (a stopped sitting resumes)."""
    summaries: dict[str, dict[str, Any]] = {}
    for members in groups_of(cells):
        dirs = [Path(out_dir) / cell.name for cell, _, _ in members]
        with ExitStack() as held:
            for run_dir in dirs:
                run_dir.mkdir(parents=True, exist_ok=True)
                held.enter_context(runlock.hold(run_dir))
                records.drop_torn_tail(run_dir)
            found = _run_group(members, dirs)
        summaries |= {cell.name: s for (cell, _, _), s in zip(members, found, strict=True)}
    return summaries


def _run_group(
    members: list[tuple[SittingCell, DictConfig, dict[str, str]]], dirs: list[Path]
) -> list[dict[str, Any]]:
    shared, views = build_group(members)
    for (cell, _, choices), view, run_dir in zip(members, views, dirs, strict=True):
        if not (run_dir / records.MANIFEST_FILE).exists():
            manifest = native_manifest(view, choices) | {"sitting": [c.name for c, _, _ in members]}
            records.write_json(run_dir / records.MANIFEST_FILE, manifest)
            (run_dir / ".hydra").mkdir(exist_ok=True)
            (run_dir / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(list(cell.overrides)))
    done = set.intersection(*(records.finished_ids(d) for d in dirs))
    with shared.startup.phase("prompts"):
        prompts = shared.task.load()
    todo = [(i, p) for i, p in enumerate(prompts) if p.id not in done]
    warm_up(shared, prompts, bool(todo))
    meter, steps, governor = hardware.LoadMeter().start(), 0, thread_governor(shared.cfg)
    names = [cell.name for cell, _, _ in members]
    for index, prompt in tqdm(todo, desc="sitting", unit="prompt"):
        threads = prompt_threads(governor, shared)
        record = safe_run_prompt(shared, prompt, index) | {"threads": threads}
        steps += decode_steps(record)
        for name, run_dir in zip(names, dirs, strict=True):
            records.append_prompt(run_dir, split_record(record, name))
    load = run_load(meter, steps, governor) if todo else None
    return [finalize(view, run_dir, load=load) for view, run_dir in zip(views, dirs, strict=True)]
