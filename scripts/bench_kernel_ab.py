"""Do two builds of the C kernels differ in speed, and do they give the same bits?

    python scripts/bench_kernel_ab.py --builds HEAD worktree
    python scripts/bench_kernel_ab.py --builds 5a1c2e3 HEAD --dtypes bfloat16 float32 \
        --sizes 1 4 16 32 --reps 15 --out docs/bench/kernel_ab_<change>
    python scripts/bench_kernel_ab.py --builds 5a1c2e3 HEAD --context 800   # a longer prefix

Each build (a git revision, or ``worktree`` for the files as they are) is compiled into a
temporary folder and swapped in turn into one fast-engine SmolLM2 per dtype, prefilled with a
HumanEval prompt (or, with ``--context N``, the first N tokens of HumanEval prompts one after
another: attention's share of a step grows with the context): whole tree-shaped forwards are
timed with builds, dtypes and sizes interleaved in every repetition (medians), then random
trees' logits are compared bit for bit against the first build. A speed-only kernel change must
say ``yes`` in every row. ``--out`` writes the table (.md) and the medians with the hardware
fingerprint and the builds (.json).
The measuring: :mod:`racer_bench.bench.bench_kernel_ab`.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch

from racer_bench.bench import common as bench
from racer_bench.bench.bench_kernel_ab import build, logits_agree, measure, resolve, table
from racer_bench.config.paths import DEFAULT_MODELS_DIR
from racer_bench.models.loaders import load_smollm2


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--builds", nargs="+", default=["HEAD", "worktree"],
        help="git revisions or 'worktree', the first the base (at least two)",
    )  # fmt: skip
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16, 32])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--context", type=int, default=None,
        help="tokens before the step (default: one HumanEval prompt)",
    )  # fmt: skip
    parser.add_argument("--cache-dir", default=DEFAULT_MODELS_DIR)
    parser.add_argument("--out", default=None, help="write the table (.md) and medians (.json)")
    args = parser.parse_args()
    if len(args.builds) < 2:
        parser.error("--builds: name at least two (a base and a build to compare)")
    args.builds = [resolve(label) for label in args.builds]
    return args


def main() -> None:
    args = parse_args()
    bench.start_kernel_bench(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        libs = {label: build(label, Path(tmp)) for label in args.builds}
    targets = {}
    for dtype in args.dtypes:
        target = load_smollm2(args.cache_dir, dtype=dtype)
        target.set_engine("fast")
        prompt = bench.humaneval_context(target, args.context)
        target.prefill(prompt[:-1])
        targets[dtype] = (target, prompt[-1])
    medians, load = bench.timed_alone(lambda: measure(targets, libs, args.sizes, args.reps))
    agree = {d: logits_agree(t, root, libs, args.sizes) for d, (t, root) in targets.items()}
    prefix = f"{args.context} tokens of HumanEval" if args.context else "a HumanEval prompt"
    text = bench.report_text(
        f"smollm2_135m, fast engine, tree-shaped forwards after {prefix}, "
        f"{torch.get_num_threads()} threads, {args.reps} interleaved repetitions (medians)",
        load,
        table(medians, agree, args.builds),
    )
    print(text)
    if args.out:
        rows = [{"dtype": d, "build": b, "tokens": n, "median_s": v}
                for (d, b, n), v in medians.items()]  # fmt: skip
        record = bench.bench_record({}, load, "fast", sizes=args.sizes, reps=args.reps,
                                    builds=args.builds, dtypes=args.dtypes,
                                    context=args.context)  # fmt: skip
        record |= {"medians": rows, "logits_identical": {d: {str(n): same for n, same in a.items()}
                                                         for d, a in agree.items()}}  # fmt: skip
        bench.write_report(args.out, text, record)


if __name__ == "__main__":
    main()
