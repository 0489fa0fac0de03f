"""Each kernel of a fast-engine step against its roofs, by tokens in the step and context.

    python scripts/bench_roofline.py
    python scripts/bench_roofline.py --sizes 1 2 4 8 16 32 64 --contexts 200 600 1200 \
        --out docs/bench/roofline_<machine>

For SmolLM2-135M on the fast engine: per GEMM (q/k/v, o, gate/up, down: summed over the
layers), the LM head and row attention, the microseconds per step, that time over the read
floor (bytes the kernel reads / the best measured read bandwidth) and its multiply-adds per
second as a share of the measured peak (our GEMM and torch's on operands that stay in cache;
float32 ``mm`` for attention). Phase times come from the phase-counter build
(``profile_layer_phases.py``); run it alone on the machine. ``--out`` writes the table (.md)
and the numbers with the hardware fingerprint (.json). The measuring:
:mod:`racer_bench.bench.bench_roofline`.
"""

from __future__ import annotations

import argparse
import dataclasses

import torch

from racer_bench.bench import bench_roofline as roof
from racer_bench.bench import common as bench
from racer_bench.bench.profile_layer_phases import profile
from racer_bench.config.paths import DEFAULT_MODELS_DIR
from racer_bench.engine.fast import floor


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--contexts", type=int, nargs="+", default=[200, 600, 1200])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--cache-dir", default=DEFAULT_MODELS_DIR)
    parser.add_argument("--out", default=None, help="write the table (.md) and numbers (.json)")
    return parser.parse_args()


def measure(target, args: argparse.Namespace) -> dict:
    prefixes = {n: bench.humaneval_context(target, n) for n in args.contexts}
    phases = profile(target, prefixes, args.sizes, args.reps)
    heads = {n: roof.lm_head_us(target, n, args.reps) for n in args.sizes}
    bandwidth = floor.measure_bandwidth()
    peaks = roof.peaks(getattr(torch, args.dtype))
    return {"phases": phases, "lm_head_us": heads, "bandwidth": bandwidth, "peaks": peaks}


def main() -> None:
    args = parse_args()
    bench.start_kernel_bench(args.threads)
    target = bench.fast_smollm2(args.cache_dir, args.dtype)
    found, load = bench.timed_alone(lambda: measure(target, args))
    gbps = max(found["bandwidth"].values())
    shape = roof.Shape.of(target.model)
    cells = roof.cells(found["phases"], found["lm_head_us"], shape, gbps, found["peaks"])
    peak_text = ", ".join(f"{k} {v / 1e9:.1f} GMAC/s" for k, v in found["peaks"].items())
    text = bench.report_text(
        f"smollm2_135m, fast engine, {args.dtype}, {torch.get_num_threads()} threads; per cell: "
        f"µs per step (summed over the layers), x the read floor at {gbps:.1f} GB/s, % of the "
        f"measured peak ({peak_text}; attention against float32 mm); phases mean of "
        f"{args.reps} tree-shaped forwards after HumanEval prefixes",
        load,
        roof.table(cells),
    )
    print(text)
    if args.out:
        record = bench.bench_record({}, load, "fast", dtype=args.dtype, contexts=args.contexts,
                                    sizes=args.sizes, reps=args.reps)  # fmt: skip
        record |= {"bandwidth_gbps": found["bandwidth"], "peak_macs_per_s": found["peaks"],
                   "cells": [dataclasses.asdict(c) for c in cells]}  # fmt: skip
        bench.write_report(args.out, text, record)


if __name__ == "__main__":
    main()
