"""A method's speedup alone and beside one busy core (``scripts/bench_load.py``): the busy core,
the verification-forward part (a worker process per GEMM panel schedule and condition), the
CLI-run part, and their Markdown tables.

Run as ``python -m racer_bench.bench.bench_load <tree> <reps> <threads>``, this module is the
forward part's worker: it prints the median milliseconds of a 1-token and a ``tree``-token
forward as JSON.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import torch

from racer_bench.bench.common import group_overrides, humaneval_prompts
from racer_bench.config.paths import DEFAULT_MODELS_DIR, REPO_ROOT
from racer_bench.engine.schedule.cost import time_tree_forward, tree_shape
from racer_bench.engine.structs import Draft
from racer_bench.models.loaders import load_smollm2

SCHEDULE_ENV = "RACER_BENCH_GEMM_SCHEDULE"
CONDITIONS = ("alone", "busy core")


@contextmanager
def condition(name: str) -> Iterator[None]:
    """Run the body alone, or beside one process that keeps one core busy."""
    if name == "alone":
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def forward_worker(tree: int, reps: int, threads: int) -> dict[str, float]:
    """Median ms of a 1-token and a ``tree``-token forward (run in a subprocess)."""
    torch.set_num_threads(threads)
    target = load_smollm2(DEFAULT_MODELS_DIR)
    target.set_engine("fast")
    prompt = humaneval_prompts(target, 1)[0]
    target.prefill(prompt[:-1])
    root = prompt[-1]
    drafts = {
        1: Draft(torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long)),
        tree: Draft(
            torch.full((tree - 1,), root, dtype=torch.long), torch.tensor(tree_shape(tree - 1))
        ),
    }
    times: dict[int, list[float]] = {n: [] for n in drafts}
    for rep in range(reps + 3):
        for n, draft in drafts.items():
            seconds = time_tree_forward(target, root, draft)
            if rep >= 3:
                times[n].append(seconds * 1e3)
    return {str(n): statistics.median(v) for n, v in times.items()}


def forward_part(schedules: Sequence[str], tree: int, reps: int, threads: int) -> list[dict]:
    """Forward times per panel schedule and condition, each measured by a fresh worker."""
    rows = []
    for schedule in schedules:
        env = {**os.environ, SCHEDULE_ENV: schedule}
        for name in CONDITIONS:
            with condition(name):
                out = subprocess.run(
                    [sys.executable, "-m", __name__, str(tree), str(reps), str(threads)],
                    env=env, capture_output=True, text=True, check=True, cwd=REPO_ROOT,
                )  # fmt: skip
            ms = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append({"schedule": schedule, "condition": name, "ms_1": ms["1"],
                         "ms_tree": ms[str(tree)]})  # fmt: skip
            print(f"forward {schedule} {name}: {ms}", file=sys.stderr)
    return rows


def contender_overrides(spec: str) -> list[str]:
    """``racer@capacity=5+scheduler=confidence`` -> ``method=racer method.capacity=5
    scheduler=confidence``: ``scheduler`` keys go to the scheduler group, the rest to the method;
    a contender naming no scheduler runs ``scheduler=fixed`` (``racer@scheduler=auto``: the CLI's
    default)."""
    method, _, rest = spec.partition("@")
    return [f"method={method}", *group_overrides([o for o in rest.split("+") if o])]


def cli_run(method: str, limit: int, threads: int, run_dir: Path, extra: Sequence[str]) -> dict:
    """One CLI run of a contender (:func:`contender_overrides`); its summary."""
    args = [sys.executable, "-m", "racer_bench", *contender_overrides(method), "task=humaneval",
            f"task.limit={limit}", f"num_threads={threads}", "logger=none",
            f"hydra.run.dir={run_dir}", *extra]  # fmt: skip
    subprocess.run(args, check=True, cwd=REPO_ROOT, stdout=subprocess.DEVNULL)
    return json.loads((run_dir / "summary.json").read_text())


def runs_part(methods: Sequence[str], limit: int, threads: int, work: Path,
              extra: Sequence[str]) -> list[dict]:  # fmt: skip
    """Every method's CLI run per condition: speedup, both tok/s and the recorded load."""
    rows = []
    for method in methods:
        for name in CONDITIONS:
            with condition(name):
                label = re.sub(r"[^A-Za-z0-9_.]+", "_", method)
                run_dir = work / f"{label}_{name.replace(' ', '_')}"
                summary = cli_run(method, limit, threads, run_dir, extra)
            load = summary.get("load") or {}
            rows.append({
                "method": method, "condition": name, "speedup": summary["speedup"],
                "tokens_per_s": summary["tokens_per_s"],
                "baseline_tokens_per_s": summary["baseline_tokens_per_s"],
                "identical": summary.get("identical"),
                "others_share": load.get("others_share"),
                "warning": summary.get("load_warning"),
            })  # fmt: skip
            print(f"run {method} {name}: {rows[-1]}", file=sys.stderr)
    return rows


def forward_table(rows: list[dict], tree: int) -> str:
    """Markdown: forward ms, cost and slowdown beside the busy core, per schedule."""
    lines = [f"| panel schedule | condition | 1-token ms | {tree}-token ms | cost({tree}) |"
             " busy / alone, 1 token | busy / alone, tree |",
             "|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    alone = {r["schedule"]: r for r in rows if r["condition"] == "alone"}
    for r in rows:
        a = alone[r["schedule"]]
        lines.append(
            f"| {r['schedule']} | {r['condition']} | {r['ms_1']:.1f} | "
            f"{r['ms_tree']:.1f} | {r['ms_tree'] / r['ms_1']:.2f} | "
            f"{r['ms_1'] / a['ms_1']:.2f} | {r['ms_tree'] / a['ms_tree']:.2f} |"
        )
    return "\n".join(lines)


def runs_table(rows: list[dict]) -> str:
    """Markdown: per method and condition, tok/s, speedup and its change beside the busy core."""
    lines = ["| method | condition | AR tok/s | method tok/s | speedup | speedup / alone |"
             " others' CPU share | identical | warning in summary |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]  # fmt: skip
    alone = {r["method"]: r for r in rows if r["condition"] == "alone"}
    for r in rows:
        share = "-" if r["others_share"] is None else f"{r['others_share']:.0%}"
        ident = "-" if r["identical"] is None else f"{r['identical']:.0%}"
        lines.append(
            f"| {r['method']} | {r['condition']} | {r['baseline_tokens_per_s']:.1f} | "
            f"{r['tokens_per_s']:.1f} | {r['speedup']:.2f}x | "
            f"{r['speedup'] / alone[r['method']]['speedup']:.2f} | {share} | {ident} | "
            f"{'yes' if r['warning'] else 'no'} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":  # the forward part's worker
    tree, reps, threads = map(int, sys.argv[1:])
    print(json.dumps(forward_worker(tree, reps, threads)))
