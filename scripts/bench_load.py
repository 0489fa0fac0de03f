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
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from racer_bench.bench.bench_load import forward_part, forward_table, runs_part, runs_table
from racer_bench.system.hardware import fingerprint


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
    main()
