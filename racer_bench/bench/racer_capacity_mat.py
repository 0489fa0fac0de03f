"""MAT of RACER variants at several capacities, without timing (``scripts/racer_capacity_mat.py``):
variants of ``conf/method/racer.yaml``, the decode of every prompt with one drafter, and the
acceptance of drafted nodes by source, depth, rank and score."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import yaml

from racer_bench.config.paths import CONF_DIR
from racer_bench.engine.decode import generate
from racer_bench.engine.drafter import Drafter
from racer_bench.engine.stopping import StopRule
from racer_bench.engine.structs import Draft, DraftContext, Feedback, Source
from racer_bench.engine.target import HFTarget
from racer_bench.engine.tree import node_depths
from racer_bench.engine.verify.greedy import GreedyVerifier

YAML = CONF_DIR / "method" / "racer.yaml"
NOT_KWARGS = ("_target_", "_partial_", "capacity")


@dataclass
class Variant:
    """A label and the method overrides it sets on top of the YAML."""

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


def decode_all(
    target: HFTarget, drafter: Drafter, prompts: Sequence[list[int]], max_new_tokens: int
) -> tuple[list[list[int]], float]:
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
