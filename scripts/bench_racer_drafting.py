"""Micro-benchmark of RACER's drafting cost and MAT on a few HumanEval prompts.

Runs the real decode loop (greedy) with smollm2 and reports, per configuration, the per-step
``propose`` and ``update`` times (mean / p50 / p95, ms), the verification time, MAT and where
accepted tokens came from. Keep it short on a shared CPU:

    python scripts/bench_racer_drafting.py --prompts 2 --max-new-tokens 128 \
        --variant "" --variant "fail_links=lazy" --variant "retrieval=false"
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter

import torch
import yaml

from methods.racer import RacerDrafter
from racer_bench.decode import generate
from racer_bench.models import load_smollm2
from racer_bench.stopping import StopRule
from racer_bench.structs import GenerationResult, Source
from racer_bench.tasks.humaneval import HumanEvalTask
from racer_bench.verify import GreedyVerifier


def parse_variant(text: str) -> dict[str, object]:
    """``"key=value key=value"`` -> kwargs (values parsed as YAML scalars)."""
    pairs = [item.split("=", 1) for item in text.split()]
    return {key: yaml.safe_load(value) for key, value in pairs}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def summarise(label: str, results: list[GenerationResult]) -> str:
    """One report line: drafting/update/verify times (ms), MAT, acceptance by source."""
    steps = [s for r in results for s in r.steps]
    draft = [1e3 * s.t_draft for s in steps]
    upd = [1e3 * s.t_update for s in steps]
    both = [a + b for a, b in zip(draft, upd, strict=True)]
    verify = statistics.fmean(1e3 * s.t_verify for s in steps)
    mat = sum(s.n_committed for s in steps) / max(len(steps), 1)
    by_source: Counter[str] = Counter()
    for s in steps:
        by_source.update({Source(k).name.lower(): v for k, v in s.accepted_by_source.items()})
    found = statistics.fmean(s.meta.get("retrieval_found", 0.0) for s in steps)
    return (
        f"{label or 'default':<28} steps={len(steps):4d} MAT={mat:.2f} "
        f"draft={statistics.fmean(draft):.3f}/{percentile(draft, 0.95):.3f} "
        f"update={statistics.fmean(upd):.3f}/{percentile(upd, 0.95):.3f} "
        f"draft+update={statistics.fmean(both):.3f}/{percentile(both, 0.5):.3f}/"
        f"{percentile(both, 0.95):.3f} verify={verify:.1f} ms "
        f"retrieval_found={found:.2f} accepted={dict(by_source)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--cache-dir", default="~/.cache/racer_bench/models")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--variant", action="append", default=None, help='e.g. "lru=false"')
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    target = load_smollm2(args.cache_dir)
    task = HumanEvalTask(limit=args.prompts, execute=False)
    prompts = [task.render(p, 0, [], target.tokenizer) for p in task.load()]
    for variant in args.variant or [""]:
        results = []
        for i, ids in enumerate(prompts):
            drafter = RacerDrafter(vocab_size=target.vocab_size, **parse_variant(variant))
            stop = StopRule(target.eos_ids, args.max_new_tokens)
            rng = torch.Generator().manual_seed(i)
            results.append(generate(target, drafter, GreedyVerifier(), ids, stop, rng))
        print(summarise(variant, results), flush=True)


if __name__ == "__main__":
    main()
