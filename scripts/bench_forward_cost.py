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
at its dtype / measured read bandwidth, :mod:`racer_bench.engine.floor`); ``--out`` writes
both tables (.md) and the medians with the hardware fingerprint (.json).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch

from racer_bench.config.paths import DEFAULT_MODELS_DIR
from racer_bench.engine.cost import time_tree_forward, tree_shape
from racer_bench.engine.floor import floor_record
from racer_bench.engine.structs import Draft
from racer_bench.engine.target import HFTarget
from racer_bench.models.loaders import load_smollm2
from racer_bench.run.bench import bench_record, code_state, humaneval_prompts, setting_line
from racer_bench.system.hardware import LoadMeter

SHAPES = ("chain", "tree")


def chain(n: int, token: int) -> Draft:
    return Draft(torch.full((n,), token, dtype=torch.long), torch.arange(-1, n - 1))


def two_level(n: int, token: int) -> Draft:
    """Up to 8 children of the root, the rest spread below them (a RACER-like shape)."""
    return Draft(torch.full((n,), token, dtype=torch.long), torch.tensor(tree_shape(n)))


def draft_of(shape: str, tokens_in_forward: int, root: int) -> Draft:
    """The draft whose forward holds ``tokens_in_forward`` tokens (root + nodes)."""
    return (chain if shape == "chain" else two_level)(tokens_in_forward - 1, root)


def measure(
    targets: dict[str, HFTarget], root: int, sizes: list[int], reps: int
) -> dict[tuple[str, str, int], float]:
    """Median seconds per (engine, shape, size); two warm-up repetitions are dropped."""
    times: dict[tuple[str, str, int], list[float]] = {}
    for rep in range(reps + 2):
        for n in sizes:
            for shape in SHAPES:
                for engine, target in targets.items():
                    seconds = time_tree_forward(target, root, draft_of(shape, n, root))
                    if rep >= 2:
                        times.setdefault((engine, shape, n), []).append(seconds)
    return {key: statistics.median(values) for key, values in times.items()}


def cost_table(medians: dict[tuple[str, str, int], float], engines: list[str], sizes: list[int]):
    """Markdown: ms and cost per engine and shape; with two engines, their time ratio."""
    header = ["tokens in forward"]
    for engine in engines:
        header += [f"{engine} {s} ms" for s in SHAPES] + [f"{engine} tree cost"]
    if len(engines) == 2:
        header += [f"tree {engines[1]} / {engines[0]}"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---:|" * len(header)]
    for n in sizes:
        cells = [str(n)]
        for engine in engines:
            base = medians[(engine, "chain", sizes[0])]
            cells += [f"{medians[(engine, s, n)] * 1e3:.1f}" for s in SHAPES]
            cells.append(f"{medians[(engine, 'tree', n)] / base:.2f}x")
        if len(engines) == 2:
            a, b = (medians[(e, "tree", n)] for e in engines)
            cells.append(f"{b / a:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def floor_table(
    medians: dict[tuple[str, str, int], float], floors: dict[str, dict], sizes: list[int]
) -> str:
    """Markdown: per contender, the floor and the chain steps in ms and as multiples of it."""
    header = ["contender", "weight MB", "floor ms", *[f"{n}-token ms (x floor)" for n in sizes]]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for name, floor in floors.items():
        cells = [name, f"{floor['weight_bytes'] / 1e6:.0f}", f"{floor['floor_ms']:.1f}"]
        for n in sizes:
            ms = medians[(name, "chain", n)] * 1e3
            cells.append(f"{ms:.1f} ({ms / floor['floor_ms']:.2f}x)")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def profile(target: HFTarget, root: int, n: int, reps: int = 5, rows: int = 15) -> str:
    """The ops that take the time of a tree-shaped n-token forward (self CPU time)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    draft = draft_of("tree", n, root)
    for _ in range(3):
        time_tree_forward(target, root, draft)
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(reps):
            time_tree_forward(target, root, draft)
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in events) / reps / 1e3
    lines = [
        f"{n}-token forward, {total:.1f} ms of op time per forward",
        "",
        "| op | ms per forward | share | calls per forward |",
        "|---|---:|---:|---:|",
    ]
    for e in events[:rows]:
        ms = e.self_cpu_time_total / reps / 1e3
        lines.append(f"| `{e.key}` | {ms:.2f} | {ms / total:.0%} | {e.count // reps} |")
    return "\n".join(lines)


def main() -> None:
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
    args = parser.parse_args()
    code_state()  # before this script writes its tracked outputs
    if args.threads:
        torch.set_num_threads(args.threads)
    targets = {}
    for label in args.engines:
        engine, _, dtype = label.partition(":")
        targets[label] = load_smollm2(args.cache_dir, dtype=dtype or "float32")
        targets[label].set_engine(engine)
    prompt = humaneval_prompts(targets[args.engines[0]], 1)[0]
    for target in targets.values():
        target.prefill(prompt[:-1])
    root = prompt[-1]
    floors = {name: floor_record(t.model, Path(args.cache_dir).parent) for name, t in
              targets.items()}  # fmt: skip
    meter = LoadMeter().start()
    medians = measure(targets, root, args.sizes, args.reps)
    load = meter.stop()
    threads = torch.get_num_threads()
    text = "\n".join([
        f"smollm2_135m (float32 unless named), prompt {len(prompt)} tokens, {threads} threads, "
        f"{args.reps} interleaved repetitions (medians)",
        setting_line(load) + "\n",
        cost_table(medians, args.engines, args.sizes),
        f"\ncost = median tree time / median time of a {args.sizes[0]}-token chain forward, "
        "same engine\n",
        floor_table(medians, floors, args.sizes),
        f"\nfloor = weight bytes at the contender's dtype / read bandwidth "
        f"({next(iter(floors.values()))['bandwidth_gbps']:.1f} GB/s, {threads} threads)",
    ])  # fmt: skip
    print(text)
    if args.out:
        save(Path(args.out), text, medians, floors, load, args)
    for n in args.profile or []:
        for engine, target in targets.items():
            print(f"\n#### {engine}: {profile(target, root, n)}")


def save(out: Path, text: str, medians: dict, floors: dict, load: dict, args) -> None:
    """The tables as markdown and the medians, floors and fingerprint as JSON."""
    out.with_suffix(".md").write_text(text + "\n")
    rows = [{"contender": e, "shape": s, "tokens": n, "median_s": v}
            for (e, s, n), v in medians.items()]  # fmt: skip
    record = bench_record({}, load, None, sizes=args.sizes, reps=args.reps,
                          contenders=args.engines)  # fmt: skip
    record |= {"medians": rows, "floors": floors}
    out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
