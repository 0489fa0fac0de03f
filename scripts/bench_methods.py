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
import json
import os
import time
from pathlib import Path

import torch

from racer_bench.config.paths import DEFAULT_MODELS_DIR
from racer_bench.engine import engine_choice
from racer_bench.engine.drafter import NullDrafter
from racer_bench.models.loaders import load_smollm2
from racer_bench.run.bench import (
    Runner,
    Tally,
    bench_record,
    code_state,
    hf_runner,
    humaneval_prompts,
    interleave,
    loop_runner,
    markdown_table,
    method_setup,
    setting_line,
)
from racer_bench.system.hardware import LoadMeter

DEFAULT_METHODS = ["pld", "racer", "logitspec", "recycling", "rest", "lookahead"]


def contender(spec: str, target):
    """``racer@capacity=16+scheduler=confidence`` -> (drafter, scheduler) with those overrides.

    Environment variables in the overrides (``checkpoint=$C/dspark.pt``, quoted in the shell)
    are expanded here, so the table names the contender without a machine path."""
    method, _, rest = spec.partition("@")
    overrides = [os.path.expandvars(o) for o in rest.split("+") if o]
    return method_setup(method, target, overrides)


def ratio_lines(tallies: dict[str, Tally], methods: list[str]) -> list[str]:
    """Throughput ratios against the outside references that ran."""
    speed = {name: t.tokens_per_s for name, t in tallies.items()}
    lines = []
    if "ar_eager" in speed:
        lines.append(f"our AR, engine / eager engine: {speed['ar'] / speed['ar_eager']:.3f}x")
    for ref, label in (("hf_generate", "transformers generate()"),
                       ("hf_prompt_lookup", "transformers prompt lookup")):  # fmt: skip
        if ref not in speed:
            continue
        mine = ["ar", "ar_eager"] if ref == "hf_generate" else []
        for name in [*mine, *methods]:
            if name in speed:
                lines.append(f"{name} / {label}: {speed[name] / speed[ref]:.3f}x")
        if ref == "hf_generate" and "hf_prompt_lookup" in speed:
            ratio = speed["hf_prompt_lookup"] / speed[ref]
            lines.append(f"transformers prompt lookup / {label}: {ratio:.3f}x")
    return lines


def main() -> None:
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
    args = parser.parse_args()
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
    n = args.max_new_tokens
    runners: dict[str, Runner] = {"ar": loop_runner(target, NullDrafter(), n)}
    if args.hf_generate or not args.no_hf or args.eager_ar:
        eager = load_smollm2(args.cache_dir, dtype=dtype) if engine != "eager" else target
        if args.eager_ar and engine != "eager":
            runners["ar_eager"] = loop_runner(eager, NullDrafter(), n)
        if args.hf_generate:
            runners["hf_generate"] = hf_runner(eager, n)
        if not args.no_hf:
            runners["hf_prompt_lookup"] = hf_runner(eager, n, prompt_lookup_num_tokens=10)
    for spec in args.methods:
        drafter, scheduler = contender(spec, target)
        runners[spec] = loop_runner(target, drafter, n, scheduler)
    interleave(runners, prompts[:1], progress=False)  # warm-up, not counted
    start = time.time()
    meter = LoadMeter().start()

    def render(tallies: dict[str, Tally], done: int) -> str:
        header = (
            f"smollm2_135m, greedy, HumanEval first {done} ({args.prompt_style} prompts), "
            f"max_new_tokens {n}, {torch.get_num_threads()} CPU threads, our loop on the "
            f"{engine} engine at {dtype}, {time.time() - start:.0f} s"
        )
        table = markdown_table(tallies, base="ar", reference="ar")
        lines = ratio_lines(tallies, args.methods)
        return "\n".join([header, setting_line(load(tallies)), "", table, "", *lines])

    def load(tallies: dict[str, Tally]) -> dict:
        """The machine's load since the timed part began (every contender's steps)."""
        return meter.stop(sum(t.steps for t in tallies.values()))

    def save(tallies: dict[str, Tally], done: int) -> None:
        """The table so far (a stopped run keeps its finished prompts) and the totals."""
        if not args.out:
            return
        out = Path(args.out).with_suffix(".md")
        out.write_text(render(tallies, done) + "\n")
        record = bench_record(tallies, load(tallies), engine, prompts=done, max_new_tokens=n,
                              prompt_style=args.prompt_style, methods=args.methods,
                              engine_choice=choice)  # fmt: skip
        out.with_suffix(".json").write_text(json.dumps(record, indent=2))

    tallies = interleave(runners, prompts, on_prompt=save)
    print(render(tallies, len(prompts)))


if __name__ == "__main__":
    main()
