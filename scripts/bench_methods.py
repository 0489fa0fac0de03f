"""Every method against our AR loop and transformers' prompt lookup, interleaved, one process.

    python scripts/bench_methods.py --limit 40 --max-new-tokens 256
    python scripts/bench_methods.py --methods racer@capacity=8 racer@capacity=16 racer@capacity=32

A contender is ``<method>`` or ``<method>@key=value+key=value`` (overrides of
``conf/method/<method>.yaml``; ``scheduler=confidence`` and ``scheduler.<key>=value`` set the
scheduler instead, e.g. ``racer@scheduler=confidence``). Greedy, smollm2, HumanEval (chat
prompts). Prints a Markdown table: tok/s, speedup over our AR, MAT, retrieval hit rate,
drafting share, identical outputs.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from racer_bench.bench import (
    Runner,
    Tally,
    hf_runner,
    humaneval_prompts,
    interleave,
    loop_runner,
    markdown_table,
    method_setup,
)
from racer_bench.engine.drafter import NullDrafter
from racer_bench.models import load_smollm2

DEFAULT_METHODS = ["pld", "racer", "logitspec", "recycling", "rest", "lookahead"]


def contender(spec: str, target):
    """``racer@capacity=16+scheduler=confidence`` -> (drafter, scheduler) with those overrides."""
    method, _, rest = spec.partition("@")
    overrides = [o for o in rest.split("+") if o]
    return method_setup(method, target, overrides)


def ratio_lines(tallies: dict, methods: list[str]) -> list[str]:
    """Our AR vs ``generate()``, and every method vs transformers' prompt lookup."""
    lines = []
    if "hf_generate" in tallies:
        ratio = tallies["ar"].tokens_per_s / tallies["hf_generate"].tokens_per_s
        lines.append(f"our AR / transformers generate(): {ratio:.3f}x")
        if "hf_prompt_lookup" in tallies:
            hf_pld = tallies["hf_prompt_lookup"].tokens_per_s / tallies["hf_generate"].tokens_per_s
            lines.append(f"transformers prompt lookup / generate(): {hf_pld:.2f}x")
    if "hf_prompt_lookup" in tallies:
        hf = tallies["hf_prompt_lookup"].tokens_per_s
        for spec in methods:
            ratio = tallies[spec].tokens_per_s / hf
            lines.append(f"{spec} / transformers prompt lookup: {ratio:.2f}x")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--limit", type=int, default=40, help="HumanEval problems")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--methods", nargs="+", default=DEFAULT_METHODS)
    parser.add_argument("--no-hf", action="store_true", help="skip transformers prompt lookup")
    parser.add_argument("--hf-generate", action="store_true", help="also time plain generate()")
    parser.add_argument("--cache-dir", default="~/.cache/racer_bench/models")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", default=None, help="write the table (.md) and totals (.json)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    target = load_smollm2(args.cache_dir)
    prompts = humaneval_prompts(target, args.limit)
    n = args.max_new_tokens
    runners: dict[str, Runner] = {"ar": loop_runner(target, NullDrafter(), n)}
    if args.hf_generate:
        runners["hf_generate"] = hf_runner(target, n)
    if not args.no_hf:
        runners["hf_prompt_lookup"] = hf_runner(target, n, prompt_lookup_num_tokens=10)
    for spec in args.methods:
        drafter, scheduler = contender(spec, target)
        runners[spec] = loop_runner(target, drafter, n, scheduler)
    interleave(runners, prompts[:1], progress=False)  # warm-up, not counted
    start = time.time()

    def render(tallies: dict[str, Tally], done: int) -> str:
        header = (
            f"smollm2_135m, greedy, HumanEval first {done}, max_new_tokens {n}, "
            f"{torch.get_num_threads()} CPU threads, {time.time() - start:.0f} s"
        )
        table = markdown_table(tallies, base="ar", reference="ar")
        return "\n".join([header, "", table, "", *ratio_lines(tallies, args.methods)])

    def save(tallies: dict[str, Tally], done: int) -> None:
        """The table so far (a stopped run keeps its finished prompts) and the totals."""
        if not args.out:
            return
        out = Path(args.out).with_suffix(".md")
        out.write_text(render(tallies, done) + "\n")
        totals = {k: {"tokens": t.tokens, "seconds": t.seconds, "mat": t.mat, "steps": t.steps}
                  for k, t in tallies.items()}  # fmt: skip
        out.with_suffix(".json").write_text(json.dumps(totals, indent=2))

    tallies = interleave(runners, prompts, on_prompt=save)
    print(render(tallies, len(prompts)))


if __name__ == "__main__":
    main()
