"""Add the paired quality measures to lossy runs recorded before they existed.

    python scripts/add_quality.py results/curated/asd_grid_gsm8k/pld/*

For every finished prompt that holds a strict-greedy generation beside the lossy one, the
runner's own code (:func:`racer_bench.run.paired.compare_with_strict`) adds each turn's target
log-probability (teacher-forced, one forward per distinct output) and the answer agreement with
strict; then the summary is recomputed (:mod:`racer_bench.analysis.resummarize`). Timings,
tokens and scores are not touched. The model, task and engine come from the run's manifest;
the data and cache folders are today's (``RACER_BENCH_DATA``, ``paths.cache_dir``), since
curated records name no machine path. Prompts that already hold the measures are skipped
unless ``--force``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf, open_dict
from tqdm.auto import tqdm

from racer_bench.analysis.quality import LOGPROB_KEY
from racer_bench.analysis.resummarize import resummarize
from racer_bench.config.construct import construct
from racer_bench.record import folder as run_records
from racer_bench.run.grid import compose_run
from racer_bench.run.paired import STRICT, compare_with_strict
from racer_bench.run.resume import pin_measured_choices
from racer_bench.run.setup import choose_engine

DATA_PLACEHOLDER = "<data_dir>"  # what scripts/curate.py writes for the data folder


def run_config(run_dir: Path) -> DictConfig:
    """The run's recorded config with today's data and cache folders.

    Curated records name no machine path: every ``<data_dir>`` becomes today's data folder and
    every ``~`` the home folder, wherever the recorded (resolved) config holds them.
    """
    manifest = run_records.read_json(run_dir / run_records.MANIFEST_FILE)
    today, _ = compose_run([])
    cfg = OmegaConf.create(_with_paths(manifest["config"], str(today.paths.data_dir)))
    with open_dict(cfg):
        cfg.paths = today.paths
        pin_measured_choices(cfg, manifest)
    return cfg


def _with_paths(value: Any, data_dir: str) -> Any:
    """``value`` with the curated path placeholders replaced (recursively)."""
    if isinstance(value, dict):
        return {k: _with_paths(v, data_dir) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_paths(v, data_dir) for v in value]
    if isinstance(value, str) and value.startswith(DATA_PLACEHOLDER):
        return data_dir + value[len(DATA_PLACEHOLDER) :]
    if isinstance(value, str) and value.startswith("~/"):
        return os.path.expanduser(value)
    return value


def needs_measures(record: dict[str, Any], force: bool) -> bool:
    """A finished paired prompt whose turns lack the target log-probability (or ``force``)."""
    if record.get("status") != "ok" or STRICT not in record or "method" not in record:
        return False
    turns = record["method"]["turns"] + record[STRICT]["turns"]
    return force or any(LOGPROB_KEY not in t for t in turns)


def rewrite_prompts(run_dir: Path, records: Sequence[dict[str, Any]]) -> None:
    """Replace ``prompts.jsonl`` in one rename, so an interrupted rewrite loses nothing."""
    path = run_dir / run_records.PROMPTS_FILE
    partial = path.with_suffix(".jsonl.partial")
    with partial.open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    os.replace(partial, path)


def add_quality(run_dir: Path, force: bool = False) -> int:
    """Measure every prompt of ``run_dir`` that lacks the measures; returns how many."""
    records = run_records.load_prompts(run_dir)
    todo = [r for r in records if needs_measures(r, force)]
    if todo:
        cfg = run_config(run_dir)
        if cfg.get("num_threads"):
            torch.set_num_threads(int(cfg.num_threads))
        task = construct(cfg.task, "task")
        target, _ = choose_engine(cfg)
        prompts = {p.id: p for p in task.load()}
        for record in tqdm(todo, desc=run_dir.name, unit="prompt"):
            record.pop("quality_error", None)
            compare_with_strict(target, task, prompts[record["id"]], record)
        rewrite_prompts(run_dir, records)
    resummarize(run_dir)
    return len(todo)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (with manifest.json)")
    parser.add_argument("--force", action="store_true", help="recompute measured prompts too")
    args = parser.parse_args(argv)
    missing = [str(r) for r in args.runs if not (r / run_records.MANIFEST_FILE).exists()]
    if missing:
        print(f"error: runs: not a run folder (no manifest.json): {', '.join(missing)}",
              file=sys.stderr)  # fmt: skip
        return 2
    for run_dir in args.runs:
        count = add_quality(run_dir, args.force)
        print(f"{run_dir}: measured {count} prompt(s); summary recomputed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
