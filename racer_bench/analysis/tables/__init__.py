"""Paper tables from loaded runs, each a render-agnostic :class:`Table` (Markdown and LaTeX:
:mod:`~racer_bench.analysis.tables.render`).

Tables, each built only when the runs hold data for it:

* main: lossless methods x Spec-Bench categories (+ overall, HumanEval, MGSM-ZH), speedup (MAT);
* speed: the main runs' absolute tok/s (AR and method), speedup [95 % CI], MAT, identical
  outputs and the machine each was measured on;
* spec_bench_categories: Spec-Bench's 13 categories x methods, speedup with its 95 % bootstrap
  interval, and MAT;
* ablation: RACER full / logits tree only / retrieval tree only / last logit / LRU off /
  lazy fail links;
* logitspec: speedup, MAT and retrieval success per task;
* asd: per task, Pareto-optimal (B, g, M) settings: throughput gain, MAT strict -> ASD,
  accuracy delta, answer agreement, log-likelihood gap, first divergence, divergence.

Papers' reported numbers (``racer_bench.analysis.paper_numbers``) sit in separate, labelled columns
unless ``paper=False``.

Schedulers: the main, speed, per-category and LogitSpec tables take runs of any scheduler
(``scheduler=auto`` is recorded as the scheduler it picked, e.g. ``confidence`` on a CPU) and
name it: a ``scheduler`` column in the row tables, ``PLD (fixed)`` in the per-category table's
header. Each (method, scheduler) pair is its own row (column), so two runs of the same method
and task that differ only in scheduler are both shown, never one dropped for the other; notes
that rank methods compare them within one scheduler.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from racer_bench.analysis import frames as run_frames
from racer_bench.analysis.tables.ablation import ablation_table
from racer_bench.analysis.tables.asd import asd_table
from racer_bench.analysis.tables.categories import spec_bench_categories_table
from racer_bench.analysis.tables.logitspec import logitspec_table
from racer_bench.analysis.tables.main_tables import main_table, speed_table
from racer_bench.analysis.tables.noise import machine_floor
from racer_bench.analysis.tables.render import Table

__all__ = ["HOME_EXPERIMENTS", "Table", "build_tables", "table_runs"]

# Each table is built from the runs of its own experiment (conf/experiment/) when the folders
# hold any, so that e.g. the LogitSpec table's 10-prompt runs never replace the main table's
# 26-prompt runs of the same method; without them (an ad-hoc folder) from every run given.
HOME_EXPERIMENTS = {
    "main": "racer_main",
    "speed": "racer_main",  # the main runs' absolute speeds
    "spec_bench_categories": "racer_main",
    "ablation": "racer_ablation",
    "logitspec": "logitspec_table",
}


def table_runs(runs: Sequence[run_frames.Run], table: str, newest: bool) -> list[run_frames.Run]:
    """The runs ``table`` is built from: its home experiment's, else all; newest reruns only."""
    home = HOME_EXPERIMENTS.get(table)
    if table == "asd":  # the grids of every experiment: the runs of a lossy verifier
        chosen = [r for r in runs if r.manifest.get("verifier") == "asd"] or list(runs)
    else:
        chosen = [r for r in runs if home and r.config.get("experiment_name") == home]
        chosen = chosen or list(runs)
    return run_frames.latest_runs(chosen) if newest else chosen


def build_tables(
    runs: Sequence[run_frames.Run], paper: bool = True, newest: bool = True, check: bool = True
) -> list[Table]:
    """Every table the runs have data for (``newest``: reruns replace older runs). With
    ``check``, the runs of each table must be comparable (one model, dtype and machine;
    :func:`~racer_bench.analysis.runs.check_comparable`), not the runs of all tables together:
    a document may hold a bfloat16 table beside a float32 one."""

    def frames(table: str) -> tuple[list[run_frames.Run], pd.DataFrame]:
        candidates = table_runs(runs, table, newest=False)
        if check and candidates:  # before reruns are dropped: a rerun at another dtype is news
            run_frames.check_comparable(candidates)
        chosen = run_frames.latest_runs(candidates) if newest else candidates
        return chosen, run_frames.runs_frame(chosen)

    main_runs, main_df = frames("main")
    cat_runs, cat_df = frames("spec_bench_categories")
    ablation_df, logitspec_df = frames("ablation")[1], frames("logitspec")[1]
    tables = [
        main_table(main_df, run_frames.categories_frame(main_runs), paper),
        speed_table(main_df),
        spec_bench_categories_table(cat_df, run_frames.categories_frame(cat_runs, "category")),
        ablation_table(ablation_df, paper, machine_floor(main_df, ablation_df)),
        logitspec_table(logitspec_df, paper, machine_floor(main_df, logitspec_df)),
        asd_table(frames("asd")[1], paper),
    ]
    return [t for t in tables if t is not None]
