"""What does a verification forward over N draft tokens cost, per engine, relative to 1 token?

    python scripts/bench_forward_cost.py --sizes 1 4 8 16 32 64 --reps 20 --threads 2
    python scripts/bench_forward_cost.py --engines eager fast --profile 1 16
    python scripts/bench_forward_cost.py --engines eager fast eager:bfloat16 fast:bfloat16 \
        --sizes 1 4 16 32 --out docs/bench/forward_floor_<machine>

A speculative step pays ``cost(N) = T(N) / T(1)`` for a tree of N nodes and commits MAT
tokens, so ``speedup ~= MAT / cost(N)``: on a GPU cost(64) is close to 1, on a small CPU it is
not, which is why CPU draft capacities are smaller (``hardware=cpu`` in ``conf/``). Times the
target's own ``forward_tree`` (plus the KV rollback) after a HumanEval prompt, for chains and
for a wide two-level tree, on every engine given (each on its own copy of the model), all
sizes and engines interleaved in every repetition, medians reported. ``--profile`` prints a
``torch.profiler`` breakdown by op of forwards of the given sizes (tree-shaped), per engine.
A second table sets each contender's 1-token step against the weight-read floor (weight bytes
at its dtype / measured read bandwidth, :mod:`racer_bench.engine.fast.floor`); ``--out`` writes
both tables (.md) and the medians with the hardware fingerprint (.json). The measuring and the
tables: :mod:`racer_bench.bench.bench_forward_cost`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from racer_bench.bench.bench_forward_cost import load_targets, measure, profile, report, save
from racer_bench.bench.common import code_state, humaneval_prompts
from racer_bench.config.paths import DEFAULT_MODELS_DIR
from racer_bench.engine.fast.floor import bandwidth, floor_record
from racer_bench.system.hardware import LoadMeter


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 8, 16, 32, 64])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--engines", nargs="+", default=["eager", "fast"], help="engine or engine:dtype each"
    )
    parser.add_argument("--profile", type=int, nargs="*", default=None, help="sizes to profile")
    parser.add_argument("--cache-dir", default=DEFAULT_MODELS_DIR)
    parser.add_argument("--out", default=None, help="write the tables (.md) and medians (.json)")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    code_state()  # before this script writes its tracked outputs
    if args.threads:
        torch.set_num_threads(args.threads)
    targets = load_targets(args.cache_dir, args.engines)
    prompt = humaneval_prompts(targets[args.engines[0]], 1)[0]
    for target in targets.values():
        target.prefill(prompt[:-1])
    root = prompt[-1]
    bw = bandwidth()  # once, in this sitting: every contender's floor divides by it
    floors = {name: floor_record(t.model, bw) for name, t in targets.items()}
    meter = LoadMeter().start()
    medians = measure(targets, root, args.sizes, args.reps)
    load = meter.stop()
    text = report(medians, floors, args.engines, args.sizes, args.reps, len(prompt), load)
    print(text)
    if args.out:
        save(Path(args.out), text, medians, floors, load, args.sizes, args.reps, args.engines)
    for n in args.profile or []:
        for engine, target in targets.items():
            print(f"\n#### {engine}: {profile(target, root, n)}")


if __name__ == "__main__":
    main()
