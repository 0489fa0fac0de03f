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
import math
from collections import Counter
from dataclasses import dataclass

import torch
import yaml

from methods.racer import RacerDrafter
from racer_bench.config.paths import CONF_DIR, DEFAULT_MODELS_DIR
from racer_bench.engine.decode import generate
from racer_bench.engine.drafter import Drafter, NullDrafter
from racer_bench.engine.stopping import StopRule
from racer_bench.engine.structs import Draft, DraftContext, Feedback, Source
from racer_bench.engine.tree import node_depths
from racer_bench.engine.verify import GreedyVerifier
from racer_bench.models.loaders import load_smollm2
from racer_bench.tasks.humaneval import HumanEvalTask

YAML = CONF_DIR / "method" / "racer.yaml"
NOT_KWARGS = ("_target_", "_partial_", "capacity")


@dataclass
class Variant:
    label: str
    overrides: dict[str, object]


def parse_variant(text: str) -> Variant:
    """``"label:key=value key=value"`` -> a :class:`Variant` (values parsed as YAML scalars)."""
    label, _, rest = text.partition(":")
    pairs = [item.split("=", 1) for item in rest.split()]
    return Variant(label or "default", {key: yaml.safe_load(value) for key, value in pairs})


def yaml_defaults() -> dict[str, object]:
    """The method config's keys as drafter kwargs (capacity is set per cell)."""
    conf = yaml.safe_load(YAML.read_text())
    return {k: v for k, v in conf.items() if k not in NOT_KWARGS}


class AcceptanceTally:
    """Wraps a drafter; counts, per node whose parent was accepted (or is the root), whether it
    was accepted, by (source, depth 1/2/3+, rank) and by (source, score decile)."""

    def __init__(self, inner: Drafter) -> None:
        self.inner, self.needs, self.capacity = inner, inner.needs, inner.capacity
        self.by_rank: Counter[tuple[str, int, int]] = Counter()
        self.by_score: Counter[tuple[str, int]] = Counter()
        self.hits: Counter[tuple] = Counter()

    def reset(self, prompt_ids: list[int], prompt_topk: torch.Tensor | None) -> None:
        self.inner.reset(prompt_ids, prompt_topk)

    def propose(self, ctx: DraftContext) -> Draft:
        return self.inner.propose(ctx)

    def update(self, fb: Feedback) -> None:
        draft, live, hits = fb.draft, {-1, *fb.accepted}, set(fb.accepted)
        parents = draft.parents.tolist()
        depths = node_depths(parents)
        sources = draft.source.tolist() if draft.source is not None else [0] * len(parents)
        ranks = draft.rank.tolist() if draft.rank is not None else [-1] * len(parents)
        scores = draft.score.tolist() if draft.score is not None else [math.nan] * len(parents)
        for i, parent in enumerate(parents):
            if parent not in live:
                continue
            source = Source(sources[i]).name.lower()
            keys = [(source, min(depths[i], 3), ranks[i])]
            if not math.isnan(scores[i]):
                keys.append((source, min(int(scores[i] * 10), 9)))
            for key in keys:
                counter = self.by_rank if len(key) == 3 else self.by_score
                counter[key] += 1
                self.hits[key] += i in hits
        self.inner.update(fb)

    def report(self) -> str:
        """Acceptance rate given the parent accepted, by source/depth/rank and by score."""
        lines = ["  source depth rank: accepted/offered"]
        for key, n in sorted(self.by_rank.items()):
            lines.append(f"  {key[0]} {key[1]} {key[2]}: {self.hits[key] / n:.3f} of {n}")
        lines.append("  source score-decile: accepted/offered")
        for key, n in sorted(self.by_score.items()):
            lines.append(f"  {key[0]} {key[1] / 10:.1f}+: {self.hits[key] / n:.3f} of {n}")
        return "\n".join(lines)


def decode_all(target, drafter: Drafter, prompts, max_new_tokens) -> tuple[list[list[int]], float]:
    """(output ids per prompt, MAT over all steps); one drafter for all prompts, as in a run."""
    outputs, steps, committed = [], 0, 0
    for i, ids in enumerate(prompts):
        stop = StopRule(target.eos_ids, max_new_tokens)
        rng = torch.Generator().manual_seed(i)
        result = generate(target, drafter, GreedyVerifier(), ids, stop, rng)
        outputs.append(result.tokens)
        steps += len(result.steps)
        committed += sum(s.n_committed for s in result.steps)
    return outputs, committed / max(steps, 1)


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
