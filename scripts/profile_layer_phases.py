"""Where does a fast-engine step's time go inside the decoder layer, by context and step size?

    python scripts/profile_layer_phases.py --contexts 200 600 --sizes 1 16
    python scripts/profile_layer_phases.py --dtype float32 --out docs/bench/layer_phases_<machine>

Builds the kernels once more with phase counters (``-DLAYER_PHASES``), swaps them into one
fast-engine SmolLM2, and times tree-shaped forwards of each size after a prefix of each length
(HumanEval prompts one after another): per phase of the layer (norms, each GEMM, rotary and
KV write, row attention, SiLU gate, residuals), summed over the layers, the microseconds per
step and their share, and what the step spends outside the layers (LM head, embedding,
Python). The counters add a few hundred clock reads per step, so compare shares, and take
step times from ``bench_forward_cost.py``. ``--out`` writes the table (.md) and the numbers
with the hardware fingerprint (.json). The measuring: :mod:`racer_bench.bench.profile_layer_phases`.
"""

from __future__ import annotations

import argparse

import torch

from racer_bench.bench import common as bench
from racer_bench.bench.profile_layer_phases import profile, table
from racer_bench.config.paths import DEFAULT_MODELS_DIR


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32", "float16"])
    parser.add_argument("--contexts", type=int, nargs="+", default=[200, 600])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--cache-dir", default=DEFAULT_MODELS_DIR)
    parser.add_argument("--out", default=None, help="write the table (.md) and numbers (.json)")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    bench.start_kernel_bench(args.threads)
    target = bench.fast_smollm2(args.cache_dir, args.dtype)
    prefixes = {n: bench.humaneval_context(target, n) for n in args.contexts}
    results, load = bench.timed_alone(lambda: profile(target, prefixes, args.sizes, args.reps))
    text = bench.report_text(
        f"smollm2_135m, fast engine, {args.dtype}, tree-shaped forwards after HumanEval "
        f"prefixes, {torch.get_num_threads()} threads, mean of {args.reps} per cell; "
        f"µs per step summed over the layers",
        load,
        table(results),
    )
    print(text)
    if args.out:
        record = bench.bench_record({}, load, "fast", dtype=args.dtype, contexts=args.contexts,
                                    sizes=args.sizes, reps=args.reps)  # fmt: skip
        record["phases_us"] = [{"context": c, "tokens": n, **shares}
                               for (c, n), shares in sorted(results.items())]  # fmt: skip
        bench.write_report(args.out, text, record)


if __name__ == "__main__":
    main()
