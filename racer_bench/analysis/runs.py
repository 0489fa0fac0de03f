"""Run folders -> :class:`Run` objects, and whether runs may be compared.

``load_runs`` reads any number of run folders (or folders holding them); the summary of each
run is recomputed from its prompt lines with :func:`racer_bench.analysis.summary.summarize`, so
a resumed or interrupted run is summarized the same way as a finished one.

Runs are only compared when their model, dtype and hardware agree, and, within a task, their
``max_new_tokens`` (:func:`check_comparable`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from racer_bench.analysis import metrics
from racer_bench.analysis.serve_summary import summarize_serving
from racer_bench.analysis.summary import summarize, summarize_batches
from racer_bench.config.construct import constructor_node
from racer_bench.record import folder as run_records
from racer_bench.tasks.base import Prompt, Task

log = logging.getLogger(__name__)
INCOMPLETE_FILE = "INCOMPLETE"
PAIR_KEYS = ("model", "dtype", "device")  # must agree across every compared run


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
        return any(metrics.turns(r, "baseline") for r in self.ok)

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
        if backend.get("mode") == "serve":  # one block per concurrency
            return summarize_serving(self.path, self.records)
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

        return instantiate(constructor_node(task_cfg))
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
        if "agreement" not in r and metrics.turns(r, "method") and metrics.turns(r, "strict"):
            texts, reference = (
                [t["text"] for t in metrics.turns(r, m)] for m in ("method", "strict")
            )
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
    summary_path = Path(run_dir) / run_records.SUMMARY_FILE
    metric = run_records.read_json(summary_path).get("metric") if summary_path.exists() else None
    return metric, lambda category: category


def find_run_dirs(path: Path | str) -> list[Path]:
    """``path`` itself when it is a run folder, else every run folder below it (sorted)."""
    path = Path(path)
    if (path / run_records.MANIFEST_FILE).exists():
        return [path]
    return sorted(p.parent for p in path.rglob(run_records.MANIFEST_FILE) if "wandb" not in p.parts)


def load_run(path: Path | str, run_id: str | None = None) -> Run:
    """One run folder (``manifest.json`` + ``prompts.jsonl``)."""
    path = Path(path)
    manifest = run_records.read_json(path / run_records.MANIFEST_FILE)
    incomplete = (path / INCOMPLETE_FILE).exists()
    return Run(path, manifest, run_records.load_prompts(path), run_id or path.name, incomplete)


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
        raise FileNotFoundError(f"no run folder (with {run_records.MANIFEST_FILE}) under {roots}")
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
