"""Run folders -> tidy pandas DataFrames: the one loader behind plots, tables, notebook and sweeps.

``load_runs`` reads any number of run folders (or folders holding them) into :class:`Run`
objects; the summary of each run is recomputed from its prompt lines with
:func:`racer_bench.analysis.summary.summarize`, so a resumed or interrupted run is
summarized the same way as a finished one. Frames:

* :func:`runs_frame`: one row per run (manifest, hyperparameters, summary metrics, CIs);
* :func:`prompts_frame`: one row per run x prompt;
* :func:`categories_frame`: one row per run x category (or reporting group);
* :func:`hist_frame` / :func:`ranks_frame`: accepted-length and accepted-rank counts;
* :func:`calibration_frame` / :func:`draft_sizes_frame`: the confidence scheduler's reliability
  bins and its forward sizes against the run's cost curve.

Runs are only compared when their model, dtype and hardware agree, and, within a task, their
``max_new_tokens`` (:func:`check_comparable`). Every frame carries the run's hardware
fingerprint (``hardware_id``, ``hardware``: its label) and ``engine``, so a table can say when
the runs it puts side by side were measured on different machines or engines.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from racer_bench.analysis import metrics as M
from racer_bench.analysis import quality as Q
from racer_bench.analysis import records as R
from racer_bench.analysis.summary import score_block, speed_block, summarize, summarize_batches
from racer_bench.engine import cost as C
from racer_bench.tasks.base import Prompt, Task

log = logging.getLogger(__name__)
CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
INCOMPLETE_FILE = "INCOMPLETE"
PAIR_KEYS = ("model", "dtype", "device")  # must agree across every compared run
CAPACITY_KEYS = ("capacity", "draft_tree_capacity", "num_draft", "max_spec_tokens")  # draft sizes
SKIP_KEYS = ("_target_", "_partial_")
METHOD_NAMES = {
    "ar": "AR", "pld": "PLD", "rest": "REST", "lookahead": "Lookahead",
    "recycling": "Token Recycling", "logitspec": "LogitSpec", "racer": "RACER",
    "sps": "SpS", "medusa": "Medusa", "eagle3": "EAGLE-3", "dspark": "DSpark",
    "suffix": "SuffixDecoding", "sam": "SAM-Decoding",
}  # fmt: skip
METHOD_ORDER = tuple(METHOD_NAMES)
TASK_NAMES = {
    "spec_bench": "Spec-Bench", "humaneval": "HumanEval", "mgsm_zh": "MGSM-ZH",
    "gsm8k": "GSM8K", "math500": "MATH-500", "tiny": "tiny",
}  # fmt: skip
TASK_ORDER = tuple(TASK_NAMES)


class IncompatibleRunsError(ValueError):
    """Runs that must not be compared (different model, dtype, hardware or max_new_tokens)."""


@dataclass
class Run:
    """One run folder: its manifest and prompt lines, with the summary recomputed from them."""

    path: Path
    manifest: dict[str, Any]
    records: list[dict[str, Any]]
    run_id: str = ""
    incomplete: bool = False
    cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> list[dict[str, Any]]:
        """Prompt lines with ``status == "ok"`` (failed prompts carry no generations)."""
        return [r for r in self.records if r.get("status") == "ok"]

    @property
    def config(self) -> dict[str, Any]:
        return self.manifest.get("config") or {}

    @property
    def method(self) -> str:
        return str(self.manifest.get("method") or "?")

    @property
    def task(self) -> str:
        return str(self.manifest.get("task") or "?")

    @property
    def has_baseline(self) -> bool:
        return any(M.turns(r, "baseline") for r in self.ok)

    @cached_property
    def task_object(self) -> Task | None:
        return rebuild_task(self.config.get("task") or {}, self.path)

    @cached_property
    def task_hooks(self) -> tuple[str | None, Callable[[str], str]]:
        return task_hooks(self.task_object, self.path)

    @property
    def metric(self) -> str | None:
        return self.task_hooks[0]

    def report_category(self, category: str) -> str:
        return self.task_hooks[1](category)

    @cached_property
    def summary(self) -> dict[str, Any]:
        backend = self.manifest.get("backend") or {}
        if backend.get("name") == "vllm":  # one block per batch size
            depth = int((self.manifest.get("config") or {}).get("backend", {}).get(
                "num_speculative_tokens", 5))  # fmt: skip
            return summarize_batches(self.records, self.metric, depth)
        records = with_text_agreement(self.records, self.task_object)
        return summarize(records, self.metric, self.has_baseline, self.report_category)


def rebuild_task(task_cfg: dict[str, Any], run_dir: Path) -> Task | None:
    """The task object of the recorded config (no data is read), or None when that fails."""
    try:
        from hydra.utils import instantiate

        return instantiate(task_cfg)
    except Exception as error:
        log.warning("%s: task %s not rebuilt (%s)", run_dir, task_cfg.get("_target_"), error)
        return None


def with_text_agreement(records: list[dict[str, Any]], task: Task | None) -> list[dict[str, Any]]:
    """Records paired with strict but without ``agreement`` (recorded before it existed) get it
    recomputed, for tasks whose agreement reads only the two texts (GSM8K, MGSM, MATH-500)."""
    if task is None or not task.agreement_from_text:
        return records
    blank = Prompt("", "", [])
    out = []
    for r in records:
        if "agreement" not in r and M.turns(r, "method") and M.turns(r, "strict"):
            texts, reference = ([t["text"] for t in M.turns(r, m)] for m in ("method", "strict"))
            r = r | {"agreement": task.agreement(blank, texts, reference)}
        out.append(r)
    return out


def task_hooks(task: Task | None, run_dir: Path) -> tuple[str | None, Callable[[str], str]]:
    """The task's score name and category -> reporting group map (e.g. MT-Bench -> multi_turn).

    Without the rebuilt task the score name comes from ``summary.json`` and categories are
    reported as they are.
    """
    if task is not None:
        return task.metric, task.report_category
    summary_path = Path(run_dir) / R.SUMMARY_FILE
    metric = R.read_json(summary_path).get("metric") if summary_path.exists() else None
    return metric, lambda category: category


def find_run_dirs(path: Path | str) -> list[Path]:
    """``path`` itself when it is a run folder, else every run folder below it (sorted)."""
    path = Path(path)
    if (path / R.MANIFEST_FILE).exists():
        return [path]
    return sorted(p.parent for p in path.rglob(R.MANIFEST_FILE) if "wandb" not in p.parts)


def load_run(path: Path | str, run_id: str | None = None) -> Run:
    """One run folder (``manifest.json`` + ``prompts.jsonl``)."""
    path = Path(path)
    manifest = R.read_json(path / R.MANIFEST_FILE)
    incomplete = (path / INCOMPLETE_FILE).exists()
    return Run(path, manifest, R.load_prompts(path), run_id or path.name, incomplete)


def load_runs(
    paths: Path | str | Iterable[Path | str],
    check: bool = True,
    include_incomplete: bool = False,
) -> list[Run]:
    """Every run folder found under ``paths``; ids are paths relative to their common root.

    Args:
        paths: run folders or folders holding them (e.g. ``results/racer_main``).
        check: refuse runs that must not be compared (:func:`check_comparable`).
        include_incomplete: keep runs marked ``INCOMPLETE`` (stopped early); skipped otherwise.
    """
    roots = [paths] if isinstance(paths, (str, Path)) else list(paths)
    dirs = sorted({d.resolve() for root in roots for d in find_run_dirs(root)})
    if not dirs:
        raise FileNotFoundError(f"no run folder (with {R.MANIFEST_FILE}) under {roots}")
    common = Path(os.path.commonpath(dirs)) if len(dirs) > 1 else dirs[0].parent
    runs = [load_run(d, d.relative_to(common).as_posix()) for d in dirs]
    skipped = [r.run_id for r in runs if r.incomplete and not include_incomplete]
    if skipped:
        log.warning("skipping incomplete runs (resume them or pass include_incomplete): %s",
                    ", ".join(skipped))  # fmt: skip
        runs = [r for r in runs if r.run_id not in skipped]
    if check:
        check_comparable(runs)
    return runs


def _describe(key: str, groups: dict[str, list[str]]) -> str:
    parts = [
        f"{value} ({len(ids)} run(s): {', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''})"
        for value, ids in groups.items()
    ]
    return f"{key} differs: " + "; ".join(parts)


def _group_ids(runs: Sequence[Run], value: Callable[[Run], Any]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for run in runs:
        groups.setdefault(str(value(run)), []).append(run.run_id)
    return groups


def check_comparable(runs: Sequence[Run]) -> None:
    """Raise :class:`IncompatibleRunsError` unless the runs may sit in one table or figure.

    Model, dtype and hardware must agree across all runs; ``max_new_tokens`` must agree among
    the runs of each task (tasks may legitimately use different output lengths).
    """
    problems = []
    for key in PAIR_KEYS:
        field_name = "model_name" if key == "model" else key
        groups = _group_ids(runs, lambda r, f=field_name: r.manifest.get(f))
        if len(groups) > 1:
            problems.append(_describe(key, groups))
    for task in sorted({r.task for r in runs}):
        same_task = [r for r in runs if r.task == task]
        groups = _group_ids(same_task, lambda r: r.manifest.get("max_new_tokens"))
        if len(groups) > 1:
            problems.append(_describe(f"max_new_tokens (task {task})", groups))
    if problems:
        raise IncompatibleRunsError(
            "these runs cannot be compared:\n  - " + "\n  - ".join(problems)
            + "\nload them separately (or pass check=False / --no-check only to explore)."
        )  # fmt: skip


def flatten(config: dict[str, Any], prefix: str) -> dict[str, Any]:
    """Scalar leaves of a nested config as ``{"<prefix>.<dotted key>": value}``."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if key in SKIP_KEYS:
            continue
        name = f"{prefix}.{key}"
        if isinstance(value, dict):
            out |= flatten(value, name)
        elif not isinstance(value, list):
            out[name] = value
    return out


def resolved_group(
    group: str,
    choice: str | None,
    conf_dir: Path = CONF_DIR,
    context: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``conf/<group>/<choice>.yaml`` as a nested dict, its interpolations resolved.

    Interpolations (e.g. the ``${by_hardware:${hardware},15,63}`` capacities) are resolved
    against ``context``, a run's top-level config; those that cannot be resolved are dropped.
    """
    path = conf_dir / group / f"{choice}.yaml"
    if not choice or not path.exists():
        return {}
    root = OmegaConf.create({k: v for k, v in (context or {}).items() if k != group})
    root[group] = OmegaConf.load(path)
    raw = OmegaConf.to_container(root[group], resolve=False)
    return _resolve_or_drop(root, group, raw if isinstance(raw, dict) else {})


def _resolve_or_drop(root: Any, prefix: str, raw: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, dict):
            value = _resolve_or_drop(root, f"{prefix}.{key}", value)
        elif isinstance(value, str) and "${" in value:
            try:
                value = OmegaConf.select(root, f"{prefix}.{key}", throw_on_resolution_failure=True)
            except Exception:  # an interpolation the run's config cannot resolve
                continue
        out[key] = value
    return out


def group_defaults(
    group: str,
    choice: str | None,
    conf_dir: Path = CONF_DIR,
    context: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Flattened defaults of ``conf/<group>/<choice>.yaml`` (see :func:`resolved_group`)."""
    return flatten(resolved_group(group, choice, conf_dir, context), group)


def overrides(run: Run) -> dict[str, Any]:
    """Method, verifier and scheduler values that differ from their YAML defaults (the variant).

    The defaults are those of this checkout's ``conf/``: a default changed after the run shows
    up as a variant of the older runs.
    """
    diff = {}
    for group in ("method", "verifier", "scheduler"):
        choice = run.manifest.get(group)
        defaults = group_defaults(group, choice, context=run.config)
        for key, value in flatten(run.config.get(group) or {}, group).items():
            if key in defaults and defaults[key] != value:
                diff[key] = value
    return diff


def variant_string(diff: dict[str, Any], drop: Iterable[str] = ()) -> str:
    """``"retrieval=false, capacity=31"`` style text of an override dict (group prefixes cut)."""
    dropped = set(drop)
    items = [(k.split(".", 1)[1], v) for k, v in diff.items() if k.split(".", 1)[1] not in dropped]
    return ", ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in items)


def run_label(run: Run, drop: Iterable[str] = ()) -> str:
    """Display name: method, non-greedy verifier, non-fixed scheduler, non-default values."""
    name = METHOD_NAMES.get(run.method, run.method)
    verifier = run.manifest.get("verifier")
    if verifier and verifier != "greedy":
        name += f" + {verifier.upper() if verifier == 'asd' else verifier}"
    scheduler = run.manifest.get("scheduler")
    if scheduler and scheduler != "fixed":
        name += f" + {scheduler} scheduler"
    variant = variant_string(overrides(run), drop)
    return f"{name} [{variant}]" if variant else name


def hydra_overrides(run: Run) -> list[str]:
    """The command-line/sweep overrides Hydra saved for the run (``.hydra/overrides.yaml``)."""
    path = run.path / ".hydra" / "overrides.yaml"
    if not path.exists():
        return []
    return [str(o) for o in OmegaConf.to_container(OmegaConf.load(path)) or []]


def capacity(run: Run) -> float:
    """The draft-size hyperparameter of the method (``capacity`` or its per-method name)."""
    method_cfg = run.config.get("method") or {}
    for key in CAPACITY_KEYS:
        if isinstance(method_cfg.get(key), (int, float)):
            return float(method_cfg[key])
    return math.nan


def mat_ci(records: Sequence[dict[str, Any]], mode: str = "method",
           n_resamples: int = 300, seed: int = 0) -> tuple[float, float]:  # fmt: skip
    """Bootstrap 95 % interval of :func:`metrics.mat`, resampling prompts."""
    if len(records) < 2:
        return math.nan, math.nan
    return M.bootstrap_ci(
        np.arange(len(records)),
        lambda idx: M.mat([records[int(i)] for i in idx], mode),
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


NOT_RECORDED_HARDWARE = "hardware not recorded"
NOT_RECORDED_ENGINE = "engine not recorded"


def hardware_of(manifest: dict[str, Any]) -> tuple[str, str]:
    """``(id, label)`` of the run's hardware fingerprint; records older than the fingerprint
    share the id ``"unknown"`` and the label ``hardware not recorded``."""
    fingerprint = manifest.get("hardware") or {}
    if not isinstance(fingerprint, dict) or not fingerprint.get("id"):
        return "unknown", NOT_RECORDED_HARDWARE
    return str(fingerprint["id"]), str(fingerprint.get("label") or fingerprint["id"])


def engine_of(manifest: dict[str, Any]) -> str:
    """The engine a run's target ran on (``eager`` / ``fast``), or ``engine not recorded``."""
    engine = manifest.get("engine")
    if isinstance(engine, dict):
        engine = engine.get("engine")
    return str(engine) if engine else NOT_RECORDED_ENGINE


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
        "family": run_label(run, drop=CAPACITY_KEYS),  # the label without the capacity
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
    """Rows in a stable reading order: task, method (paper order), label."""
    if df.empty:
        return df
    rank = {m: i for i, m in enumerate(METHOD_ORDER)}
    task_rank = {t: i for i, t in enumerate(TASK_ORDER)}
    keys = pd.DataFrame({
        "t": df["task"].map(lambda t: task_rank.get(t, len(task_rank))),
        "m": df["method"].map(lambda m: rank.get(m, len(rank))),
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
        "n_turns": len(M.turns(record, "method")),
        "new_tokens": M.new_tokens(record, "method"),
        "wall_time": M.wall_time(record, "method"),
        "tokens_per_s": M.tokens_per_s(rs, "method"),
        "mat": M.mat(rs, "method"),
        "n_steps": len(M.step_column(record, "method", "n_committed")),
        "draft_size_mean": M.mean_step_column(rs, "n_draft"),
        "draft_time_share": M.draft_time_share(rs),
        "retrieval_hit_rate": M.retrieval_hit_rate(rs),
        "stop_reason": (M.turns(record, "method") or [{}])[-1].get("stop_reason"),
    }
    for mode, prefix in (("baseline", "baseline_"), ("strict", "strict_")):
        if M.turns(record, mode):
            row[f"{prefix}tokens_per_s"] = M.tokens_per_s(rs, mode)
            row[f"{prefix}new_tokens"] = M.new_tokens(record, mode)
    if M.turns(record, "baseline"):
        row["speedup"] = M.speedup(rs)
        row["identical"] = M.identical_rate(rs)
    if M.turns(record, "strict"):
        row["gain_vs_strict"] = M.speedup(rs, "method", "strict") - 1.0
        row["strict_identical"] = M.identical_rate(rs, "method", "strict")
        row["agreement"] = Q.agreement(record)
        row["logprob_gap"] = Q.logprob_gap(record)
        row["first_divergence"] = Q.record_first_divergence(record)
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
        hist = M.acceptance_histogram(run.ok)
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
        ranks = [k for r in run.ok for step in M.step_column(r, "method", "accepted_ranks")
                 for k in step]  # fmt: skip
        if not ranks:
            continue
        values, counts = np.unique(np.asarray(ranks, dtype=int), return_counts=True)
        meta = run_meta(run) | {"mat": run.summary.get("mat", math.nan)}
        for rank, count in zip(values.tolist(), counts.tolist(), strict=True):
            rows.append(meta | {"rank": rank, "count": count, "share": count / len(ranks)})
    return _order(pd.DataFrame(rows))


def latest_runs(runs: Sequence[Run]) -> list[Run]:
    """Newest run per (label, task): reruns of the same configuration replace older ones."""
    best: dict[tuple[str, str], Run] = {}
    for run in sorted(runs, key=lambda r: (str(r.manifest.get("started")), r.run_id)):
        key = (run_label(run), run.task)
        if key in best:
            log.warning("%s replaces the older run %s of %s on %s",
                        run.run_id, best[key].run_id, *key)  # fmt: skip
        best[key] = run
    return list(best.values())


def add_cli_args(parser: argparse.ArgumentParser) -> None:
    """The loading options shared by the result scripts (``--results``, ``--no-check``, ...)."""
    parser.add_argument(
        "--results",
        nargs="+",
        required=True,
        type=Path,
        help="run folders or folders holding them, e.g. results/racer_main",
    )
    parser.add_argument(
        "--no-check",
        action="store_true",
        help="allow different models/dtypes/hardware (exploration only)",
    )
    parser.add_argument(
        "--include-incomplete", action="store_true", help="also use runs marked INCOMPLETE"
    )
    parser.add_argument(
        "--all-runs",
        action="store_true",
        help="keep reruns of a configuration (default: the newest only)",
    )


def load_cli(args: argparse.Namespace, newest: bool = True) -> list[Run]:
    """The runs named by :func:`add_cli_args` options; a refused pairing exits with its reason.
    ``newest=False`` keeps reruns whatever ``--all-runs`` says (the caller picks)."""
    try:
        runs = load_runs(args.results, check=not args.no_check,
                         include_incomplete=args.include_incomplete)  # fmt: skip
    except (IncompatibleRunsError, FileNotFoundError) as error:
        raise SystemExit(f"error: {error}") from None
    return runs if args.all_runs or not newest else latest_runs(runs)


def calibration_frame(runs: Sequence[Run]) -> pd.DataFrame:
    """Reliability bins of the scheduler's per-node survival predictions, per run.

    One row per run x non-empty bin: ``bin_low``/``bin_high`` (predicted survival range),
    ``nodes``, ``predicted`` (mean prediction in the bin), ``accepted`` (share accepted) and the
    run's ``calibration_error`` (:func:`racer_bench.analysis.metrics.calibration_error`). Runs
    without predictions (``scheduler=fixed``, older runs) are left out.
    """
    rows = []
    for run in runs:
        table = M.calibration_table(run.ok)
        if not table:
            continue
        n_bins = len(table["count"])
        meta = run_meta(run) | {"calibration_error": M.calibration_error(run.ok)}
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


def cost_profile(run: Run) -> C.CostProfile | None:
    """The cost curve a scheduled run used (``cost_profile.json`` named by its manifest)."""
    named = (run.manifest.get("cost_profile") or {}).get("file")
    path = run.path / named if named else None
    return C.CostProfile.load(path) if path is not None and path.exists() else None


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
        values, counts = np.unique(M.forward_sizes(run.ok), return_counts=True)
        steps = dict(zip(values.tolist(), counts.tolist(), strict=True))
        total = sum(steps.values()) or 1
        candidates = M.forward_sizes(run.ok, nodes="n_candidates")
        meta = run_meta(run) | {
            "candidate_forward_mean": float(np.mean(candidates)) if candidates else math.nan
        }
        for size in range(1, max([profile.max_size, *steps]) + 1):
            n = steps.get(size, 0)
            rows.append(
                meta | {"size": size, "steps": n, "share": n / total, "cost": profile(size)}
            )
    return _order(pd.DataFrame(rows))
