"""Does the cost curve hold from one minute to the next? Measure it again and again, alone.

    python scripts/bench_cost_drift.py --sittings 60 --out docs/bench/cost_drift_<machine>

Loads the fast-engine SmolLM2 at ``--dtype``, prefills the scheduler's profiling context, and
runs the cost-curve measurement of ``scheduler.profile=auto`` (tree-shaped forwards, sizes
interleaved, medians of ``--reps``) ``--sittings`` times back to back. Prints, per forward
size, the spread of cost(N) over the sittings and its correlation with the sitting's 1-token
time; ``--out`` writes the table (.md), every sitting (.json, with the hardware fingerprint)
and a scatter of cost(16) against the 1-token time (.png). The measuring:
:mod:`racer_bench.bench.bench_cost_drift`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from racer_bench.bench import common as bench
from racer_bench.bench.bench_cost_drift import one_token_ms, sittings, summary, table
from racer_bench.config.paths import DEFAULT_MODELS_DIR
from racer_bench.engine.schedule import cost


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32", "float16"])
    parser.add_argument("--sittings", type=int, default=60)
    parser.add_argument("--max-size", type=int, default=32)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--cache-dir", default=DEFAULT_MODELS_DIR)
    parser.add_argument("--out", default=None, help="write the table (.md), sittings (.json), plot")
    return parser.parse_args()


def plot(rows: list[dict], path: Path, size: int = 16) -> None:
    """cost(size) against the 1-token ms, one point per sitting."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.6))
    ax.scatter([r["ms"][1] for r in rows], [r["cost"][size] for r in rows], s=14)
    ax.set_xlabel("1-token forward (ms)")
    ax.set_ylabel(f"cost({size}) = {size}-token / 1-token forward")
    ax.set_title("cost curve, sitting by sitting", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    args = parse_args()
    bench.start_kernel_bench(args.threads)
    target = bench.fast_smollm2(args.cache_dir, args.dtype)
    sizes = cost.grid(args.max_size)
    timer = cost.target_timer(target, cost.DEFAULT_CONTEXT)
    rows, load = bench.timed_alone(lambda: sittings(timer, sizes, args.sittings, args.reps))
    text = bench.report_text(
        f"smollm2_135m, fast engine, {args.dtype}, the cost curve of scheduler.profile=auto "
        f"({cost.DEFAULT_CONTEXT}-token context, tree-shaped forwards, medians of {args.reps} "
        f"interleaved repetitions) measured {args.sittings} times back to back, "
        f"{torch.get_num_threads()} threads",
        load,
        table(rows, sizes),
    )
    print(text)
    if args.out:
        name = Path(args.out).name
        record = bench.bench_record({}, load, "fast", dtype=args.dtype, sizes=sizes, reps=args.reps,
                                    context=cost.DEFAULT_CONTEXT)  # fmt: skip
        record |= {"summary": summary(rows, sizes), "one_token_ms": one_token_ms(rows),
                   "sittings": rows}  # fmt: skip
        bench.write_report(args.out, text + f"\n\n![cost(16) by sitting]({name}.png)", record)
        plot(rows, Path(args.out).with_suffix(".png"))


if __name__ == "__main__":
    main()
