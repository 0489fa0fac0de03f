"""DSpark as a head kind of ``scripts/train_drafter.py`` (:mod:`methods.common.heads.kind`): block
training at random anchors, and the confidence temperatures fitted on held-out blocks."""

from __future__ import annotations

import random
from typing import Any

import torch
from torch import nn

from methods.common.calibration import expected_calibration_error, sequential_temperatures, survival
from methods.common.heads.kind import (
    HeadKind,
    Sample,
    answer_roots,
    attention_settings,
    start_from_target,
)
from methods.dspark.head import (
    DSparkHead,
    block_outputs,
    dspark_config,
    dspark_loss,
    pass_last_feature,
)
from racer_bench.engine.target import HFTarget


class DSparkKind(HeadKind):
    """Block backbone + Markov and confidence heads (``head.block_*``, ``head.markov_*``,
    ``head.anchors``, ``head.root_anchors``, ``head.conf_weight``, ``head.init``)."""

    name = "dspark"

    def build(
        self, target: HFTarget, draft_ids: torch.Tensor, feature_size: int
    ) -> tuple[nn.Module, dict[str, Any]]:
        s = self.settings
        hidden = int(target.head.weight.shape[1])
        common = attention_settings(s, target, self.feature_layers(target))
        config = dspark_config(
            hidden, feature_size, target.vocab_size, block_size=s.block_size,
            num_layers=s.block_layers, markov_rank=s.markov_rank, markov_gate=s.markov_gate,
            block_input=s.block_input, causal=s.block_causal, **common,
        )  # fmt: skip
        head = DSparkHead(config, draft_ids)
        if s.init == "pass_last":
            pass_last_feature(head)
        start_from_target(head, target, draft_ids)
        return head, config

    def loss(
        self, head: Any, sample: Sample, rng: random.Random
    ) -> tuple[torch.Tensor, dict[str, float]]:
        s, feats = self.settings, sample.feats.float()
        roots = anchors(sample, s.anchors, rng)
        if not len(roots):
            return feats.new_zeros((), requires_grad=True), {}
        solo = None
        if s.root_anchors != 0:  # one-row blocks at other answer positions (null = all)
            rest = sorted(set(anchors(sample, None, rng).tolist()) - set(roots.tolist()))
            count = len(rest) if s.root_anchors is None else s.root_anchors
            solo = torch.tensor(sorted(rng.sample(rest, min(count, len(rest)))), dtype=torch.long)
        return dspark_loss(head, feats, sample.ids, sample.labels, roots, decay=s.block_decay,
                           conf_weight=s.conf_weight, root_anchors=solo)  # fmt: skip

    def depth1_logits(self, head: Any, sample: Sample) -> tuple[torch.Tensor, torch.Tensor]:
        roots = answer_roots(sample)
        out = block_outputs(head, sample.feats.float(), sample.ids, sample.labels, roots)
        return out["logits"][:, 0], sample.labels[roots + 1]

    @torch.no_grad()
    def calibrate(self, head: Any, held: list[Sample]) -> dict[str, Any] | None:
        """Fit the confidence temperatures on held-out blocks; returns before/after metrics."""
        return calibrate(head, held)


def anchors(sample: Sample, count: int | None, rng: random.Random) -> torch.Tensor:
    """Block roots whose labels lie in the target's own continuation: LongTensor[A]."""
    first = max(sample.prompt_len - 1, 1)
    pool = list(range(first, len(sample.ids) - 1))
    if count is not None and len(pool) > count:
        pool = sorted(rng.sample(pool, count))
    return torch.tensor(pool, dtype=torch.long)


def calibrate(head: DSparkHead, held: list[Sample], per_sequence: int = 128) -> dict[str, Any]:
    """Fit DSpark's confidence temperatures on held-out blocks; returns before/after metrics."""
    rng = random.Random(0)
    logits, accepted, inside = [], [], []
    for s in held:
        roots = anchors(s, per_sequence, rng)
        if len(roots):
            out = block_outputs(head, s.feats.float(), s.ids, s.labels, roots)
            logits.append(out["conf_logit"])
            accepted.append(out["accepted"])
            inside.append(out["inside"])
    if not logits:
        return {"calibrated": False}
    z, acc, valid = torch.cat(logits), torch.cat(accepted), torch.cat(inside)
    temps = sequential_temperatures(z, acc, valid)
    head.conf_temperature.copy_(temps)
    alive = acc.long().cumprod(-1).bool()
    before, after = survival(z, torch.ones_like(temps)), survival(z, temps)
    ece = [[expected_calibration_error(s[valid[:, k], k], alive[valid[:, k], k])
            for k in range(z.shape[1])] for s in (before, after)]  # fmt: skip
    return {
        "calibrated": True, "blocks": len(z), "temperatures": temps.tolist(),
        "ece_survival_before": ece[0], "ece_survival_after": ece[1],
        "conditional_acceptance": conditional_acceptance(acc, valid),
        "chain_accepted_mean": float(alive[valid.all(-1)].float().sum(-1).mean()),
        "predicted_chain_accepted_mean": float(after[valid.all(-1)].sum(-1).mean()),
    }  # fmt: skip


def conditional_acceptance(accepted: torch.Tensor, valid: torch.Tensor) -> list[float | None]:
    """Per position k, the acceptance rate among blocks whose positions before k were all
    accepted (teacher-forced): what a verifier sees at depth k + 1 of a chain."""
    alive = torch.ones(len(accepted), dtype=torch.bool)
    rates: list[float | None] = []
    for k in range(accepted.shape[1]):
        rows = valid[:, k] & alive
        rates.append(float(accepted[rows, k].float().mean()) if rows.any() else None)
        alive = alive & accepted[:, k]
    return rates
