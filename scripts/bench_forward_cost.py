"""What does a verification forward over N draft tokens cost, relative to a 1-token one?

    python scripts/bench_forward_cost.py --sizes 1 4 8 16 32 64 --reps 20 --threads 2

A speculative step pays ``cost(N) = T(N) / T(1)`` for a tree of N nodes and commits MAT
tokens, so ``speedup ~= MAT / cost(N)``: on a GPU cost(64) is close to 1, on a small CPU it is
not, which is why CPU draft capacities are smaller (``hardware=cpu`` in ``conf/``). Times the
target's own ``forward_tree`` (plus the KV rollback) after a HumanEval prompt, sizes interleaved
in every repetition, medians reported, for chains and for a wide two-level tree.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from racer_bench.bench import humaneval_prompts
from racer_bench.engine import kv_cache
from racer_bench.engine.structs import Draft
from racer_bench.engine.target import HFTarget
from racer_bench.models import load_smollm2


def chain(n: int, token: int) -> Draft:
    return Draft(torch.full((n,), token, dtype=torch.long), torch.arange(-1, n - 1))


def two_level(n: int, token: int) -> Draft:
    """Up to 8 children of the root, the rest spread below them (a RACER-like shape)."""
    width = min(8, n)
    parents = [-1] * width + [i % width for i in range(n - width)]
    return Draft(torch.full((n,), token, dtype=torch.long), torch.tensor(parents))


def time_forward(target: HFTarget, root: int, draft: Draft) -> float:
    """Seconds for one tree forward; the cache is rolled back afterwards."""
    past = target.length
    target.synchronize()
    start = time.perf_counter()
    target.forward_tree(root, draft)
    target.synchronize()
    seconds = time.perf_counter() - start
    kv_cache.drop_last(target.cache, target.length - past)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 8, 16, 32, 64])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--cache-dir", default="~/.cache/racer_bench/models")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    target = load_smollm2(args.cache_dir)
    prompt = humaneval_prompts(target, 1)[0]
    target.prefill(prompt[:-1])
    root = prompt[-1]
    shapes = {"chain": chain, "tree": two_level}
    times: dict[tuple[str, int], list[float]] = {}
    for rep in range(args.reps + 2):  # the first two repetitions warm up
        for n in args.sizes:
            for name, make in shapes.items():
                draft = make(n - 1, root)  # n tokens in the forward = root + n - 1 nodes
                seconds = time_forward(target, root, draft)
                if rep >= 2:
                    times.setdefault((name, n), []).append(seconds)
    base = statistics.median(times[("chain", args.sizes[0])])
    print(f"prompt {len(prompt)} tokens, {torch.get_num_threads()} threads, {args.reps} reps\n")
    print("| tokens in forward | chain ms | chain cost | tree ms | tree cost |")
    print("|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        c, t = (statistics.median(times[(s, n)]) for s in shapes)
        print(f"| {n} | {c * 1e3:.1f} | {c / base:.2f}x | {t * 1e3:.1f} | {t / base:.2f}x |")
    print(f"\ncost = median time / median time of a {args.sizes[0]}-token chain forward")


if __name__ == "__main__":
    main()
