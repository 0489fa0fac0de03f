"""Runs -> tidy pandas DataFrames: the one loader behind plots, tables, notebook and sweeps.

Loading and the comparability check live in :mod:`racer_bench.analysis.runs`, a run's label in
:mod:`racer_bench.analysis.labels`; both are re-exported here. Frames:

* :func:`runs_frame`: one row per run (manifest, hyperparameters, summary metrics, CIs);
* :func:`prompts_frame`: one row per run x prompt;
* :func:`categories_frame`: one row per run x category (or reporting group);
* :func:`hist_frame` / :func:`ranks_frame`: accepted-length and accepted-rank counts;
* :func:`calibration_frame` / :func:`draft_sizes_frame`: the confidence scheduler's reliability
  bins and its forward sizes against the run's cost curve.

Every frame carries the run's hardware fingerprint (``hardware_id``, ``hardware``: its label)
and ``engine``, so a table can say when the runs it puts side by side were measured on
different machines or engines. Rows follow the display order of the task and method YAMLs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from racer_bench.analysis import metrics, names, quality
from racer_bench.analysis.labels import (
    NOT_RECORDED_ENGINE,
    NOT_RECORDED_HARDWARE,
    capacity,
    engine_of,
    family,
    flatten,
    group_defaults,
    hardware_of,
    hydra_overrides,
    latest_runs,
    overrides,
    resolved_group,
    run_label,
    variant_string,
)
from racer_bench.analysis.options import add_cli_args, load_cli
from racer_bench.analysis.runs import (
    INCOMPLETE_FILE,
    IncompatibleRunsError,
    Run,
    check_comparable,
    find_run_dirs,
    load_run,
    load_runs,
)
from racer_bench.analysis.summary import score_block, speed_block
from racer_bench.engine.schedule import cost

__all__ = [  # the loading and labelling names, kept importable from here
    "INCOMPLETE_FILE", "NOT_RECORDED_ENGINE", "NOT_RECORDED_HARDWARE", "IncompatibleRunsError",
    "Run", "add_cli_args", "capacity", "check_comparable", "engine_of", "find_run_dirs",
    "flatten", "group_defaults", "hardware_of", "hydra_overrides", "latest_runs", "load_cli",
    "load_run", "load_runs", "overrides", "resolved_group", "run_label", "variant_string",
]  # fmt: skip


def mat_ci(records: Sequence[dict[str, Any]], mode: str = "method",
           n_resamples: int = 300, seed: int = 0) -> tuple[float, float]:  # fmt: skip
    """Bootstrap 95 % interval of :func:`metrics.mat`, resampling prompts."""
    if len(records) < 2:
        return math.nan, math.nan
    return metrics.bootstrap_ci(
        np.arange(len(records)),
        lambda idx: metrics.mat([records[int(i)] for i in idx], mode),
        n_resamples=n_resamples,
        seed=seed,
    )


def scalars(block: dict[str, Any], metric: str | None) -> dict[str, Any]:
    """Scalar metrics of a summary block; ``[low, high]`` pairs become ``*_low``/``*_high``.

    The task's own score (e.g. ``pass@1``) is also copied to ``score`` / ``baseline_score`` /
    ``strict_score``.
    """
    out: dict[str, Any] = {}
    for key, value in block.items():
        if isinstance(value, list) and len(value) == 2:
            stem = key.removesuffix("_ci95")
            out[f"{stem}_ci_low"], out[f"{stem}_ci_high"] = value
        elif isinstance(value, (int, float, str, bool)) and key not in ("run_dir", "metric"):
            out[key] = value
    if metric:
        out["score"] = block.get(metric, math.nan)
        out["baseline_score"] = block.get(f"baseline_{metric}", math.nan)
        out["strict_score"] = block.get(f"strict_{metric}", math.nan)
    return out


def run_meta(run: Run) -> dict[str, Any]:
    """Columns that identify a run in every frame."""
    return {
        "run_id": run.run_id,
        "label": run_label(run),
        "method": run.method,
        "task": run.task,
        "verifier": run.manifest.get("verifier"),
        "scheduler": run.manifest.get("scheduler") or "fixed",
        "variant": variant_string(overrides(run)),
        "model": run.manifest.get("model_name") or run.manifest.get("model"),
        **{key: run.manifest.get(key) for key in ("dtype", "device", "max_new_tokens")},
        "hardware_id": hardware_of(run.manifest)[0],
        "hardware": hardware_of(run.manifest)[1],
        "engine": engine_of(run.manifest),
    }


def run_row(run: Run) -> dict[str, Any]:
    """One row of :func:`runs_frame`."""
    m = run.manifest
    row = run_meta(run) | {
        "path": str(run.path),
        "experiment": run.config.get("experiment_name"),
        **{key: m.get(key) for key in ("seed", "lossless")},
        **{key: m.get(key) for key in ("persist_across_prompts", "git_sha", "git_dirty")},
        "started": m.get("started"),
        "incomplete": run.incomplete,
        "capacity": capacity(run),
        "family": family(run),
        "overrides": " ".join(hydra_overrides(run)),
        "metric": run.metric,
    }
    row |= flatten(run.config.get("method") or {}, "method")
    row |= flatten(run.config.get("verifier") or {}, "verifier")
    row |= flatten(run.config.get("scheduler") or {}, "scheduler")
    row |= scalars(run.summary, run.metric)
    if "mat_ci" not in run.cache:
        run.cache["mat_ci"] = mat_ci(run.ok)
    row["mat_ci_low"], row["mat_ci_high"] = run.cache["mat_ci"]
    return row


def _order(df: pd.DataFrame) -> pd.DataFrame:
    """Rows in a stable reading order: task, method (their YAMLs' display order), label."""
    if df.empty:
        return df
    keys = pd.DataFrame({
        "t": df["task"].map(names.task_rank),
        "m": df["method"].map(names.method_rank),
    })  # fmt: skip
    order = keys.assign(task=df["task"], label=df["label"], run=df["run_id"]).sort_values(
        ["t", "task", "m", "label", "run"], kind="stable"
    )
    return df.loc[order.index].reset_index(drop=True)


def runs_frame(runs: Sequence[Run]) -> pd.DataFrame:
    """One row per run: identity, manifest fields, hyperparameters and summary metrics."""
    return _order(pd.DataFrame([run_row(run) for run in runs]))


def prompt_metrics(record: dict[str, Any], metric: str | None) -> dict[str, Any]:
    """Per-prompt metrics of one ``ok`` prompt line (metrics.py over a one-prompt run)."""
    rs = [record]
    row: dict[str, Any] = {
        "n_turns": len(metrics.turns(record, "method")),
        "new_tokens": metrics.new_tokens(record, "method"),
        "wall_time": metrics.wall_time(record, "method"),
        "tokens_per_s": metrics.tokens_per_s(rs, "method"),
        "mat": metrics.mat(rs, "method"),
        "n_steps": len(metrics.step_column(record, "method", "n_committed")),
        "draft_size_mean": metrics.mean_step_column(rs, "n_draft"),
        "draft_time_share": metrics.draft_time_share(rs),
        "retrieval_hit_rate": metrics.retrieval_hit_rate(rs),
        "stop_reason": (metrics.turns(record, "method") or [{}])[-1].get("stop_reason"),
    }
    for mode, prefix in (("baseline", "baseline_"), ("strict", "strict_")):
        if metrics.turns(record, mode):
            row[f"{prefix}tokens_per_s"] = metrics.tokens_per_s(rs, mode)
            row[f"{prefix}new_tokens"] = metrics.new_tokens(record, mode)
    if metrics.turns(record, "baseline"):
        row["speedup"] = metrics.speedup(rs)
        row["identical"] = metrics.identical_rate(rs)
    if metrics.turns(record, "strict"):
        row["gain_vs_strict"] = metrics.speedup(rs, "method", "strict") - 1.0
        row["strict_identical"] = metrics.identical_rate(rs, "method", "strict")
        row["agreement"] = quality.agreement(record)
        row["logprob_gap"] = quality.logprob_gap(record)
        row["first_divergence"] = quality.record_first_divergence(record)
    if metric:
        for field_name in ("score", "baseline_score", "strict_score"):
            if field_name in record:
                row[field_name] = (record[field_name] or {}).get(metric, math.nan)
    return row


def prompts_frame(runs: Sequence[Run]) -> pd.DataFrame:
    """One row per run x prompt (failed prompts included, with their error and NaN metrics)."""
    rows = []
    for run in runs:
        meta = run_meta(run)
        for record in run.records:
            row = meta | {
                "prompt_id": record.get("id"),
                "index": record.get("index"),
                "category": record.get("category"),
                "group": run.report_category(str(record.get("category"))),
                "status": record.get("status"),
                "error": record.get("error"),
            }
            if record.get("status") == "ok":
                row |= prompt_metrics(record, run.metric)
            rows.append(row)
    return _order(pd.DataFrame(rows))


def subsets(run: Run, level: str) -> dict[str, list[dict[str, Any]]]:
    """The run's ``ok`` prompt lines by raw category or by reporting group."""
    out: dict[str, list[dict[str, Any]]] = {}
    for record in run.ok:
        name = str(record.get("category"))
        out.setdefault(run.report_category(name) if level == "group" else name, []).append(record)
    return out


def categories_frame(runs: Sequence[Run], level: str = "group") -> pd.DataFrame:
    """One row per run x category: the summary's speed and score blocks on that subset.

    Args:
        level: ``group`` (reporting groups, e.g. Spec-Bench's 8 MT-Bench categories merged into
            ``multi_turn``) or ``category`` (raw categories).
    """
    if level not in ("group", "category"):
        raise ValueError(f"level must be 'group' or 'category', got {level!r}")
    rows = []
    for run in runs:
        for name, rs in subsets(run, level).items():
            block = speed_block(rs, run.has_baseline)
            block |= score_block(rs, run.metric, run.has_baseline)
            row = run_meta(run) | {"category": name} | scalars(block, run.metric)
            row["mat_ci_low"], row["mat_ci_high"] = mat_ci(rs)
            rows.append(row)
    return _order(pd.DataFrame(rows))


def hist_frame(runs: Sequence[Run]) -> pd.DataFrame:
    """Steps by accepted draft tokens (bonus excluded) per run, with each count's share."""
    rows = []
    for run in runs:
        hist = metrics.acceptance_histogram(run.ok)
        total = sum(hist.values())
        for accepted, steps in hist.items():
            rows.append(run_meta(run) | {"n_accepted": accepted, "steps": steps,
                                          "share": steps / total})  # fmt: skip
    return _order(pd.DataFrame(rows))


def ranks_frame(runs: Sequence[Run]) -> pd.DataFrame:
    """Accepted logits-tree nodes by the top-k rank they were copied from, per run.

    Only runs whose drafter records ranks (``Draft.rank``) appear; ``share`` is per run.
    """
    rows = []
    for run in runs:
        ranks = [k for r in run.ok for step in metrics.step_column(r, "method", "accepted_ranks")
                 for k in step]  # fmt: skip
        if not ranks:
            continue
        values, counts = np.unique(np.asarray(ranks, dtype=int), return_counts=True)
        meta = run_meta(run) | {"mat": run.summary.get("mat", math.nan)}
        for rank, count in zip(values.tolist(), counts.tolist(), strict=True):
            rows.append(meta | {"rank": rank, "count": count, "share": count / len(ranks)})
    return _order(pd.DataFrame(rows))


def calibration_frame(runs: Sequence[Run]) -> pd.DataFrame:
    """Reliability bins of the scheduler's per-node survival predictions, per run.

    One row per run x non-empty bin: ``bin_low``/``bin_high`` (predicted survival range),
    ``nodes``, ``predicted`` (mean prediction in the bin), ``accepted`` (share accepted) and the
    run's ``calibration_error`` (:func:`racer_bench.analysis.metrics.calibration_error`). Runs
    without predictions (``scheduler=fixed``, older runs) are left out.
    """
    rows = []
    for run in runs:
        table = metrics.calibration_table(run.ok)
        if not table:
            continue
        n_bins = len(table["count"])
        meta = run_meta(run) | {"calibration_error": metrics.calibration_error(run.ok)}
        for b in range(n_bins):
            count = float(table["count"][b])
            if count == 0:
                continue
            rows.append(meta | {
                "bin_low": b / n_bins, "bin_high": (b + 1) / n_bins, "nodes": count,
                "predicted": table["predicted"][b] / count,
                "accepted": table["accepted"][b] / count,
            })  # fmt: skip
    return _order(pd.DataFrame(rows))


def cost_profile(run: Run) -> cost.CostProfile | None:
    """The cost curve a scheduled run used (``cost_profile.json`` named by its manifest)."""
    named = (run.manifest.get("cost_profile") or {}).get("file")
    path = run.path / named if named else None
    return cost.CostProfile.load(path) if path is not None and path.exists() else None


def draft_sizes_frame(runs: Sequence[Run]) -> pd.DataFrame:
    """Scheduled forward sizes against each run's cost curve.

    One row per run x forward size N (tokens in the verification forward = draft nodes + root
    + aux tokens) that the run used or that its curve covers: ``steps`` and ``share`` of the
    run's steps at that size, ``cost`` = cost(N) on the run's curve. Only runs that saved a
    cost profile appear; ``candidate_forward_mean`` is the mean forward the unscheduled
    candidate trees would have made.
    """
    rows = []
    for run in runs:
        profile = cost_profile(run)
        if profile is None:
            continue
        values, counts = np.unique(metrics.forward_sizes(run.ok), return_counts=True)
        steps = dict(zip(values.tolist(), counts.tolist(), strict=True))
        total = sum(steps.values()) or 1
        candidates = metrics.forward_sizes(run.ok, nodes="n_candidates")
        meta = run_meta(run) | {
            "candidate_forward_mean": float(np.mean(candidates)) if candidates else math.nan
        }
        for size in range(1, max([profile.max_size, *steps]) + 1):
            n = steps.get(size, 0)
            rows.append(
                meta | {"size": size, "steps": n, "share": n / total, "cost": profile(size)}
            )
    return _order(pd.DataFrame(rows))
