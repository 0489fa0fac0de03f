"""Micro-benchmark of RACER's drafting cost and MAT on a few HumanEval prompts.

Runs the real decode loop (greedy) with smollm2 and reports, per configuration, the drafter's
own ``propose`` + ``update`` time per step (wall and CPU, ms), its share of the loop's step
time, MAT and where accepted tokens came from. The loop's ``t_update`` also holds the top-k of
every verified node's logits, which the loop computes for the drafter. Keep it short on a
shared CPU (wall-clock outliers there are preemption; the CPU time is the drafter's own):

    python scripts/bench_racer_drafting.py --prompts 2 --max-new-tokens 128 \
        --variant "" --variant "fail_links=lazy" --variant "retrieval=false"
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter

import torch
import yaml

from methods.racer import RacerDrafter
from racer_bench.bench.common import setting_line
from racer_bench.config.paths import DEFAULT_MODELS_DIR
from racer_bench.engine.decode import generate
from racer_bench.engine.stopping import StopRule
from racer_bench.engine.structs import Draft, DraftContext, Feedback, GenerationResult, Source
from racer_bench.engine.verify.greedy import GreedyVerifier
from racer_bench.models.loaders import load_smollm2
from racer_bench.system.hardware import LoadMeter
from racer_bench.tasks.humaneval import HumanEvalTask


def parse_variant(text: str) -> dict[str, object]:
    """``"key=value key=value"`` -> kwargs (values parsed as YAML scalars)."""
    pairs = [item.split("=", 1) for item in text.split()]
    return {key: yaml.safe_load(value) for key, value in pairs}


class TimedDrafter:
    """Forwards to a drafter and records wall and CPU seconds of every propose/update call."""

    def __init__(self, inner: RacerDrafter) -> None:
        self.inner = inner
        self.needs = inner.needs
        self.capacity = inner.capacity
        self.wall: list[float] = []  # propose + update of one step
        self.cpu: list[float] = []

    def reset(self, prompt_ids: list[int], prompt_topk: torch.Tensor | None) -> None:
        self.inner.reset(prompt_ids, prompt_topk)

    def propose(self, ctx: DraftContext) -> Draft:
        wall, cpu = time.perf_counter(), time.thread_time()
        draft = self.inner.propose(ctx)
        self.wall.append(time.perf_counter() - wall)
        self.cpu.append(time.thread_time() - cpu)
        return draft

    def update(self, fb: Feedback) -> None:
        wall, cpu = time.perf_counter(), time.thread_time()
        self.inner.update(fb)
        self.wall[-1] += time.perf_counter() - wall
        self.cpu[-1] += time.thread_time() - cpu


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def summarise(label: str, results: list[GenerationResult], timers: list[TimedDrafter]) -> str:
    """One report line: drafter and loop times (ms), MAT, acceptance by source."""
    steps = [s for r in results for s in r.steps]
    wall = [1e3 * t for timer in timers for t in timer.wall]
    cpu = [1e3 * t for timer in timers for t in timer.cpu]
    step_ms = statistics.fmean(1e3 * (s.t_draft + s.t_verify + s.t_update) for s in steps)
    mat = sum(s.n_committed for s in steps) / max(len(steps), 1)
    by_source: Counter[str] = Counter()
    for s in steps:
        by_source.update({Source(k).name.lower(): v for k, v in s.accepted_by_source.items()})
    found = statistics.fmean(s.meta.get("retrieval_found", 0.0) for s in steps)
    return (
        f"{label or 'default':<24} steps={len(steps):4d} MAT={mat:.2f} | drafter propose+update "
        f"wall mean/p50/p95={statistics.fmean(wall):.3f}/{percentile(wall, 0.5):.3f}/"
        f"{percentile(wall, 0.95):.3f} ms, cpu mean/p95={statistics.fmean(cpu):.3f}/"
        f"{percentile(cpu, 0.95):.3f} ms | loop step={step_ms:.1f} ms "
        f"(update incl. top-k={statistics.fmean(1e3 * s.t_update for s in steps):.2f} ms), "
        f"drafter share={statistics.fmean(wall) / step_ms:.2%} | retrieval_found={found:.2f} "
        f"accepted={dict(by_source)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--cache-dir", default=DEFAULT_MODELS_DIR)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0 = default)")
    parser.add_argument("--variant", action="append", default=None, help='e.g. "lru=false"')
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    target = load_smollm2(args.cache_dir)
    task = HumanEvalTask(limit=args.prompts, execute=False)
    prompts = [task.render(p, 0, [], target.tokenizer) for p in task.load()]
    for variant in args.variant or [""]:
        meter = LoadMeter().start()
        results, timers = [], []
        for i, ids in enumerate(prompts):
            timer = TimedDrafter(RacerDrafter(target.vocab_size, **parse_variant(variant)))
            stop = StopRule(target.eos_ids, args.max_new_tokens)
            rng = torch.Generator().manual_seed(i)
            results.append(generate(target, timer, GreedyVerifier(), ids, stop, rng))
            timers.append(timer)
        print(summarise(variant, results, timers), flush=True)
        print(setting_line(meter.stop(sum(len(r.steps) for r in results))), flush=True)


if __name__ == "__main__":
    main()
