"""Approximate Speculative Decoding (ASD): greedy verification that may accept cheap mismatches.

Paper: Feng et al., "Approximate Speculative Decoding" (arXiv 2608.03447); reference code
Kissmetothemoon/ASD (``src/asd/budget.py::choose_prefix`` and the DSpark reproduction's
``reproduce/dspark/rule.py``). Behaviour followed (greedy only):

* regret of a draft token = target's max logit - its logit at that position (raw logits,
  clamped at 0); a token equal to the target's argmax is an exact match and free;
* scanning a draft block x_0..x_{K-1}, a mismatch at index i is accepted only if
  (a) gate: ``regret / value_i <= gate`` with ``value_i = K - i`` (``suffix_values="count"``,
  reference API) or ``(K - i) / K`` (``"normalized"``, DeepSeek reproduction);
  (b) budget: the block's cumulative accepted regret stays within the request's remaining
  ledger ``budget - spent`` (reference: 1e-9 slack; ``reproduction_strict`` instead also needs
  the risk *before* this token to be strictly below the remaining budget, without slack);
  (c) cap: at most ``cap`` accepted mismatches in the block.
  The first failing position ends the accepted prefix;
* tokens after an accepted mismatch that equal the target's argmax are committed from the same
  forward (realized-prefix suffix reuse: the logits after node i were computed with node i in
  the prefix), and the target's argmax at the stop position is the bonus;
* the accepted mismatches' regrets are charged to a per-request ledger (:meth:`reset` clears
  it); ``budget == 0``, ``gate == 0`` or ``cap == 0`` is exactly strict greedy verification
  (the reference's ``strict_identity``, applied to both variants).

Trees (our extension; the paper treats chains): the rule is applied to every root-to-leaf path
with the same ledger state, ``K`` being that path's length; the longest feasible prefix wins,
ties going to the fewest accepted mismatches, then to the first last-accepted node in node order
(the convention of :func:`racer_bench.engine.verify.greedy.greedy_accept`). Only the chosen path is
charged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch

from racer_bench.config.schema import NonNegativeFloat, NonNegativeInt
from racer_bench.engine.structs import Draft, VerifyResult
from racer_bench.engine.verify.greedy import greedy_accept

SLACK = 1e-9  # the reference API's tolerance on the budget check
SUFFIX_VALUES = ("count", "normalized")


@dataclass(frozen=True)
class PathDecision:
    """Outcome of the ASD scan along one path."""

    accepted: int  # accepted prefix length
    relaxed: int  # accepted mismatches
    risk: float  # their summed regret


def suffix_values(length: int, mode: str) -> list[float]:
    """Value of each position of a ``length``-token block: ``K - i`` or ``(K - i) / K``."""
    if mode == "count":
        return [float(length - i) for i in range(length)]
    if mode == "normalized":
        return [(length - i) / length for i in range(length)]
    raise ValueError(f"suffix_values must be one of {SUFFIX_VALUES}, got {mode!r}")


def scan_path(
    regrets: Sequence[float],
    mismatched: Sequence[bool],
    remaining: float,
    gate: float,
    cap: int,
    values: Sequence[float],
    reproduction_strict: bool = False,
) -> PathDecision:
    """Longest prefix of one draft block that passes the gate, budget and cap checks.

    Args:
        regrets: per-position regret (max logit - draft token's logit), length K.
        mismatched: per-position "draft token != target argmax", length K.
        remaining: request budget left before this block.
        gate: maximum regret per unit of suffix value.
        cap: maximum accepted mismatches in the block.
        values: per-position suffix values (see :func:`suffix_values`), length K.
        reproduction_strict: also require the risk before a mismatch to be < ``remaining``.
    """
    risk, relaxed, accepted = 0.0, 0, 0
    for i, (mismatch, regret, value) in enumerate(zip(mismatched, regrets, values, strict=True)):
        if mismatch:
            before = risk
            risk += regret
            relaxed += 1
            if reproduction_strict:
                affordable = before < remaining and risk <= remaining
            else:
                affordable = risk <= remaining + SLACK
            if not (regret / value <= gate and affordable and relaxed <= cap):
                return PathDecision(accepted, relaxed - 1, before)
        accepted = i + 1
    return PathDecision(accepted, relaxed, risk)


def leaf_paths(parents: Sequence[int]) -> list[list[int]]:
    """Root-to-leaf node paths, leaves in node order."""
    paths: list[list[int]] = []
    has_child = [False] * len(parents)
    for p in parents:
        if p >= 0:
            has_child[p] = True
    prefix: list[list[int]] = []
    for j, p in enumerate(parents):
        prefix.append([*(prefix[p] if p >= 0 else []), j])
        if not has_child[j]:
            paths.append(prefix[j])
    return paths


def node_scores(draft: Draft, logits: torch.Tensor) -> tuple[list[float], list[bool], list[int]]:
    """Per-node regret and mismatch flag, plus the target argmax of every row.

    Args:
        draft: the draft tree (N nodes).
        logits: FloatTensor[N+1, V]; row ``p + 1`` is the prediction the node below ``p`` faces.
    """
    rows = draft.parents.to(logits.device) + 1
    top, argmax = logits.amax(dim=-1), logits.argmax(dim=-1)
    drafted = logits[rows, draft.tokens.to(logits.device)]
    regrets = (top[rows] - drafted).clamp_min(0).tolist()
    mismatched = (argmax[rows] != draft.tokens.to(logits.device)).tolist()
    return regrets, mismatched, argmax.tolist()


class ASDVerifier:
    """Greedy verification with a per-request regret budget (see the module docstring)."""

    name: ClassVar[str] = "asd"
    lossless: ClassVar[bool] = False

    def __init__(
        self,
        budget: NonNegativeFloat = 8.0,
        gate: NonNegativeFloat = 0.25,
        cap: NonNegativeInt = 2,
        suffix_values: Literal["count", "normalized"] = "count",
        reproduction_strict: bool = False,
    ) -> None:
        if budget < 0 or gate < 0 or cap < 0:
            raise ValueError("budget, gate and cap must be >= 0")
        if suffix_values not in SUFFIX_VALUES:
            raise ValueError(f"suffix_values must be one of {SUFFIX_VALUES}")
        self.budget = float(budget)
        self.gate = float(gate)
        self.cap = int(cap)
        self.suffix_values = suffix_values
        self.reproduction_strict = bool(reproduction_strict)
        self.spent = 0.0

    @property
    def strict(self) -> bool:
        """True when no mismatch can ever be accepted (plain greedy verification)."""
        return self.budget == 0 or self.gate == 0 or self.cap == 0

    @property
    def remaining(self) -> float:
        return max(0.0, self.budget - self.spent)

    def reset(self) -> None:
        self.spent = 0.0

    def verify(self, draft: Draft, logits: torch.Tensor, rng: torch.Generator) -> VerifyResult:
        tokens, parents = draft.tokens.tolist(), draft.parents.tolist()
        if self.strict or not tokens:
            accepted, bonus = greedy_accept(tokens, parents, logits.argmax(-1).tolist())
            return VerifyResult(accepted=accepted, bonus=bonus)
        regrets, mismatched, argmax = node_scores(draft, logits)
        best_path: list[int] = []
        best = PathDecision(0, 0, 0.0)
        for path in leaf_paths(parents):
            decision = scan_path(
                [regrets[j] for j in path],
                [mismatched[j] for j in path],
                self.remaining,
                self.gate,
                self.cap,
                suffix_values(len(path), self.suffix_values),
                self.reproduction_strict,
            )
            if _better(decision, path, best, best_path):
                best, best_path = decision, path[: decision.accepted]
        self.spent += best.risk
        last = best_path[-1] if best_path else -1
        return VerifyResult(
            accepted=best_path, bonus=argmax[last + 1], n_relaxed=best.relaxed, regret=best.risk
        )


def _better(new: PathDecision, path: list[int], best: PathDecision, best_path: list[int]) -> bool:
    """Longer prefix, then fewer mismatches, then the earlier last-accepted node."""
    if new.accepted != best.accepted:
        return new.accepted > best.accepted
    if new.relaxed != best.relaxed:
        return new.relaxed < best.relaxed
    return new.accepted > 0 and path[new.accepted - 1] < best_path[-1]
