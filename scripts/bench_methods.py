"""Every method against our AR loop and transformers' prompt lookup, interleaved, one process.

    python scripts/bench_methods.py --limit 40 --max-new-tokens 256
    python scripts/bench_methods.py --methods racer@capacity=8 racer@capacity=16 racer@capacity=32
    python scripts/bench_methods.py --prompt-style completion --threads 1 --eager-ar --hf-generate

A contender is ``<method>`` or ``<method>@key=value+key=value`` (overrides of
``conf/method/<method>.yaml``; ``scheduler=confidence`` and ``scheduler.<key>=value`` set the
scheduler instead, e.g. ``racer@scheduler=confidence``). Greedy, smollm2, HumanEval (chat
prompts, or the bare code completion prompts with ``--prompt-style completion``). Our loop
runs on ``--engine``; the transformers contenders (``generate()``, prompt lookup) always run on
a separate, untouched eager copy of the model, and ``--eager-ar`` adds our AR loop on that copy
(``ar_eager``), so engine gains show up against both. Prints a Markdown table: tok/s, speedup
over our AR, MAT, retrieval hit rate, drafting share, identical outputs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from racer_bench.bench.bench_methods import References, Report, contender_runners
from racer_bench.bench.common import code_state, humaneval_prompts, interleave
from racer_bench.config.paths import DEFAULT_MODELS_DIR
from racer_bench.engine.fast import engine_choice
from racer_bench.models.loaders import load_smollm2

DEFAULT_METHODS = ["pld", "racer", "logitspec", "recycling", "rest", "lookahead"]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--limit", type=int, default=40, help="HumanEval problems")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--methods", nargs="+", default=DEFAULT_METHODS)
    parser.add_argument("--no-hf", action="store_true", help="skip transformers prompt lookup")
    parser.add_argument("--hf-generate", action="store_true", help="also time plain generate()")
    parser.add_argument("--cache-dir", default=DEFAULT_MODELS_DIR)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--engine", default="auto", help="our loop's engine: auto|eager|fast")
    parser.add_argument("--dtype", default="auto", help="auto|float32|bfloat16 (auto: measured)")
    parser.add_argument("--eager-ar", action="store_true", help="also our AR on the eager engine")
    parser.add_argument("--prompt-style", default="chat", choices=["chat", "completion"])
    parser.add_argument("--out", default=None, help="write the table (.md) and totals (.json)")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    code_state()  # before this script writes its tracked outputs
    if args.threads:
        torch.set_num_threads(args.threads)
    cache = Path(args.cache_dir).expanduser().parent  # choices measured once, beside the models
    target, choice = engine_choice.choose(
        lambda dtype: load_smollm2(args.cache_dir, dtype=dtype), args.engine, args.dtype, cache,
        "smollm2_135m",
    )  # fmt: skip
    engine, dtype = choice["chosen"], choice["dtype"]
    prompts = humaneval_prompts(target, args.limit, args.prompt_style)
    references = References(args.eager_ar, args.hf_generate, hf_prompt_lookup=not args.no_hf)
    runners = contender_runners(
        target, engine, lambda: load_smollm2(args.cache_dir, dtype=dtype), args.methods,
        args.max_new_tokens, references,
    )  # fmt: skip
    interleave(runners, prompts[:1], progress=False)  # warm-up, not counted
    report = Report(args.prompt_style, args.max_new_tokens, args.methods, choice, args.out)
    tallies = interleave(runners, prompts, on_prompt=report.save)
    print(report.render(tallies, len(prompts)))


if __name__ == "__main__":
    main()
