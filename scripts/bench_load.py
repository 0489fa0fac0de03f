"""A method's speedup alone and beside one busy core, both conditions in one script.

    python scripts/bench_load.py --methods pld racer --limit 10 --threads 2 \
        --out docs/bench/load_humaneval10

A contender is a method with optional overrides, ``racer@scheduler=confidence`` or
``racer@capacity=5`` (as in ``scripts/bench_methods.py``).

Two parts, each condition back to back on the same prompts:

* **forward**: median time of a 1-token and of a ``--tree``-token verification forward (fast
  engine, HumanEval prompt cached), alone and beside a busy core, for each OpenMP schedule of
  the small-GEMM panel loop (``RACER_BENCH_GEMM_SCHEDULE``; one subprocess per schedule and
  condition). It shows which steps a busy core slows and whether the schedule is the cause.
* **runs**: the CLI (``python -m racer_bench method=<m> task=humaneval task.limit=N
  num_threads=T``) per method, alone, then beside the busy core; speedup over AR in the same
  run, both tok/s, and the load the run recorded (its summary carries the warning).

The busy core is a spinning Python process started before and stopped after each loaded
condition. Prints Markdown tables; ``--out`` also writes them (.md) and the numbers (.json)
with the machine's fingerprint.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from racer_bench.config.paths import DEFAULT_MODELS_DIR, REPO_ROOT

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
    import torch

    from racer_bench.engine.cost import time_tree_forward, tree_shape
    from racer_bench.engine.structs import Draft
    from racer_bench.models.loaders import load_smollm2
    from racer_bench.run.bench import humaneval_prompts

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
    rows = []
    for schedule in schedules:
        env = {**os.environ, SCHEDULE_ENV: schedule}
        for name in CONDITIONS:
            with condition(name):
                out = subprocess.run(
                    [sys.executable, __file__, "--forward-worker", str(tree), str(reps),
                     str(threads)],
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
    from racer_bench.run.bench import group_overrides

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


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=["pld", "racer"])
    parser.add_argument("--limit", type=int, default=10, help="HumanEval prompts per run")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--schedules",
        nargs="*",
        default=["static", "dynamic"],
        help="GEMM panel schedules for the forward part (none: skip it)",
    )
    parser.add_argument("--tree", type=int, default=12, help="tokens in the tree forward")
    parser.add_argument("--reps", type=int, default=30, help="forward repetitions")
    parser.add_argument("--no-runs", action="store_true", help="forward part only")
    parser.add_argument("--out", type=Path, default=None, help="write <out>.md and <out>.json")
    parser.add_argument("overrides", nargs="*", help="extra CLI overrides for the runs")
    return parser.parse_intermixed_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    from racer_bench.system.hardware import fingerprint

    result: dict[str, Any] = {"hardware": fingerprint(args.threads), "args": vars(args) | {
        "out": str(args.out) if args.out else None}}  # fmt: skip
    parts = []
    if args.schedules:
        result["forward"] = forward_part(args.schedules, args.tree, args.reps, args.threads)
        parts.append(forward_table(result["forward"], args.tree))
    if not args.no_runs:
        with tempfile.TemporaryDirectory() as work:
            result["runs"] = runs_part(args.methods, args.limit, args.threads, Path(work),
                                       args.overrides)  # fmt: skip
        parts.append(runs_table(result["runs"]))
    text = f"Machine: {result['hardware']['label']}\n\n" + "\n\n".join(parts) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".md").write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--forward-worker":
        tree, reps, threads = map(int, sys.argv[2:])
        print(json.dumps(forward_worker(tree, reps, threads)))
    else:
        main()
