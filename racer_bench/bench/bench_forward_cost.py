"""What a verification forward over N draft tokens costs, per engine, relative to 1 token
(``scripts/bench_forward_cost.py``): a model copy per engine, the drafts timed, the interleaved
medians, the cost and weight-read floor tables, an op profile, and the saved record.

A speculative step pays ``cost(N) = T(N) / T(1)`` for a tree of N nodes and commits MAT
tokens, so ``speedup ~= MAT / cost(N)``.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import torch

from racer_bench.bench.common import bench_record, setting_line
from racer_bench.engine.schedule.cost import time_tree_forward, tree_shape
from racer_bench.engine.structs import Draft
from racer_bench.engine.target import HFTarget
from racer_bench.models.loaders import load_smollm2

Medians = dict[tuple[str, str, int], float]  # (contender, shape, tokens in forward) -> seconds

SHAPES = ("chain", "tree")


def load_targets(cache_dir: str, labels: list[str]) -> dict[str, HFTarget]:
    """A copy of the model per ``engine`` or ``engine:dtype`` label (float32 unless named)."""
    targets = {}
    for label in labels:
        engine, _, dtype = label.partition(":")
        targets[label] = load_smollm2(cache_dir, dtype=dtype or "float32")
        targets[label].set_engine(engine)
    return targets


def chain(n: int, token: int) -> Draft:
    """A chain of ``n`` nodes, every one ``token``."""
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


def cost_table(medians: Medians, engines: list[str], sizes: list[int]) -> str:
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


def report(
    medians: Medians, floors: dict[str, dict], engines: list[str], sizes: list[int],
    reps: int, prompt_tokens: int, load: dict,
) -> str:  # fmt: skip
    """The settings line, both tables and how cost and floor are defined."""
    threads = torch.get_num_threads()
    return "\n".join([
        f"smollm2_135m (float32 unless named), prompt {prompt_tokens} tokens, {threads} threads, "
        f"{reps} interleaved repetitions (medians)",
        setting_line(load) + "\n",
        cost_table(medians, engines, sizes),
        f"\ncost = median tree time / median time of a {sizes[0]}-token chain forward, "
        "same engine\n",
        floor_table(medians, floors, sizes),
        f"\nfloor = weight bytes at the contender's dtype / read bandwidth "
        f"({next(iter(floors.values()))['bandwidth_gbps']:.1f} GB/s, {threads} threads)",
    ])  # fmt: skip


def save(
    out: Path, text: str, medians: Medians, floors: dict, load: dict, sizes: list[int],
    reps: int, engines: list[str],
) -> None:  # fmt: skip
    """The tables as markdown and the medians, floors and fingerprint as JSON."""
    out.with_suffix(".md").write_text(text + "\n")
    rows = [{"contender": e, "shape": s, "tokens": n, "median_s": v}
            for (e, s, n), v in medians.items()]  # fmt: skip
    record = bench_record({}, load, None, sizes=sizes, reps=reps, contenders=engines)
    record |= {"medians": rows, "floors": floors}
    out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
