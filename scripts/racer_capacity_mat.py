"""MAT of RACER variants at several capacities (no timing: safe on a busy machine).

Runs the real decode loop (greedy, smollm2) on the first HumanEval problems as completion
prompts without stop strings, for every (variant, capacity), and prints a Markdown table of MAT
(tokens committed per step, bonus included). A variant is a label and method overrides on top
of ``conf/method/racer.yaml``; ``--ar`` also decodes autoregressively once per prompt and
reports how many outputs of each cell are identical to it (greedy decoding is lossless):

    PYTHONPATH=. nice -n 10 python scripts/racer_capacity_mat.py --ar --variant "default:" \
        --variant "paper, exact links:selection=reference" \
        --variant "paper, lazy links:selection=reference fail_links=lazy"

(``PYTHONPATH=.`` imports this checkout rather than an installed copy.) ``--acceptance`` also
prints, per cell, how often a node is accepted when its parent is, by source, depth and rank,
and by the drafter's ``Draft.score`` decile (a calibration check of the scores).
"""

from __future__ import annotations

import argparse

import torch

from methods.racer import RacerDrafter
from racer_bench.bench.racer_capacity_mat import (
    YAML,
    AcceptanceTally,
    decode_all,
    parse_variant,
    yaml_defaults,
)
from racer_bench.config.paths import DEFAULT_MODELS_DIR
from racer_bench.engine.drafter import Drafter, NullDrafter
from racer_bench.models.loaders import load_smollm2
from racer_bench.tasks.humaneval import HumanEvalTask


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=20, help="HumanEval/0..N-1")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--capacities", type=int, nargs="+", default=[7, 15, 31, 63])
    parser.add_argument("--variant", action="append", default=None,
                        help='"label:key=value ..." (method overrides); repeatable')  # fmt: skip
    parser.add_argument("--ar", action="store_true", help="check outputs against AR decoding")
    parser.add_argument("--acceptance", action="store_true",
                        help="also print acceptance by source, depth, rank and score")  # fmt: skip
    parser.add_argument("--cache-dir", default=DEFAULT_MODELS_DIR)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0 = default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    target = load_smollm2(args.cache_dir)
    task = HumanEvalTask(limit=args.prompts, execute=False, prompt_style="completion",
                         stop_strings=[])  # fmt: skip
    prompts = [task.render(p, 0, [], target.tokenizer) for p in task.load()]
    reference = None
    if args.ar:
        reference = decode_all(target, NullDrafter(), prompts, args.max_new_tokens)[0]
    variants = [parse_variant(v) for v in args.variant or ["default:"]]
    defaults = yaml_defaults()
    header = "| variant | " + " | ".join(f"cap {c}" for c in args.capacities) + " |"
    rows = [header, "|---|" + "---:|" * len(args.capacities)]
    print(f"defaults from {YAML.name}: {defaults}", flush=True)
    for variant in variants:
        cells = []
        for capacity in args.capacities:
            kwargs = {**defaults, **variant.overrides, "capacity": capacity}
            drafter: Drafter = RacerDrafter(target.vocab_size, **kwargs)
            if args.acceptance:
                drafter = AcceptanceTally(drafter)
            outputs, mat = decode_all(target, drafter, prompts, args.max_new_tokens)
            cell = f"{mat:.2f}"
            if reference is not None:
                same = sum(a == b for a, b in zip(outputs, reference, strict=True))
                cell += f" ({same}/{len(prompts)})"
            cells.append(cell)
            print(f"{variant.label} capacity={capacity}: MAT {cell}", flush=True)
            if isinstance(drafter, AcceptanceTally):
                print(drafter.report(), flush=True)
        rows.append(f"| {variant.label} | " + " | ".join(cells) + " |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
