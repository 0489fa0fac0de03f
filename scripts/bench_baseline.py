"""Is our AR loop a fair baseline? Our loop vs transformers generate, interleaved, one process.

    python scripts/bench_baseline.py --limit 20 --max-new-tokens 256

Prints tok/s of our AR loop and of ``generate(do_sample=False)`` (ours must be >= 0.95x), and
the prompt-lookup speedups: transformers ``generate(prompt_lookup_num_tokens=10)`` over
``generate()``, and our PLD over our AR, on the same HumanEval prompts.
"""

from __future__ import annotations

import argparse
import json

import torch

from racer_bench.bench import (
    hf_runner,
    humaneval_prompts,
    interleave,
    loop_runner,
    markdown_table,
    method_drafter,
)
from racer_bench.drafter import NullDrafter
from racer_bench.models import load_smollm2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=20, help="HumanEval problems")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--cache-dir", default="~/.cache/racer_bench/models")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", default=None, help="also write the totals here")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    target = load_smollm2(args.cache_dir)
    prompts = humaneval_prompts(target, args.limit)
    n = args.max_new_tokens
    runners = {
        "ours_ar": loop_runner(target, NullDrafter(), n),
        "hf_generate": hf_runner(target, n),
        "hf_prompt_lookup": hf_runner(target, n, prompt_lookup_num_tokens=10),
        "ours_pld": loop_runner(target, method_drafter("pld", target.vocab_size), n),
    }
    interleave(runners, prompts[:1], progress=False)  # warm-up, not counted
    t = interleave(runners, prompts)
    print(markdown_table(t, base="ours_ar", reference="ours_ar"))
    ours_vs_hf = t["ours_ar"].tokens_per_s / t["hf_generate"].tokens_per_s
    hf_pld = t["hf_prompt_lookup"].tokens_per_s / t["hf_generate"].tokens_per_s
    our_pld = t["ours_pld"].tokens_per_s / t["ours_ar"].tokens_per_s
    print(f"\nour AR / transformers generate: {ours_vs_hf:.3f}x (target >= 0.95x)")
    print(f"transformers prompt lookup speedup (vs generate): {hf_pld:.2f}x")
    print(f"our PLD speedup (vs our AR): {our_pld:.2f}x")
    if args.json:
        totals = {k: {"tokens": v.tokens, "seconds": v.seconds, "mat": v.mat} for k, v in t.items()}
        with open(args.json, "w") as f:
            json.dump(totals, f, indent=2)


if __name__ == "__main__":
    main()
