"""How many tokens of each request's chain vLLM verifies in a step: the confidence scheduler's
rule applied to a whole batch (``backend.draft_length=confidence``).

vLLM verifies every drafted token of every request in one forward, so a step's cost grows with
the batch's drafted tokens while each request's extra tokens pay only when accepted. Every chain
node gets an acceptance estimate p from
:class:`~racer_bench.engine.schedule.acceptance.AcceptanceEstimator`
(the native :class:`~racer_bench.engine.schedule.scheduler.ConfidenceScheduler`'s features and
drafter
probability back-off) and a survival S = product of p along its chain. With ``b`` requests and
``k`` kept draft tokens in all, a step commits ``b + sum(S)`` tokens in expectation and costs
``C(b + k)`` seconds; admitting nodes in decreasing survival over all chains together and keeping
the prefix with the most tokens per second is optimal over prefix-closed choices (the argument
of :func:`~racer_bench.engine.schedule.scheduler.best_prefix`, with ``b`` roots). A request may keep
nothing: a plain AR step for it.

``C`` is measured, not assumed: :class:`StepCost` fits seconds per step against verified tokens
per batch size from the time between the proposer's calls in pure decode steps (no request
joining or prefilling), which includes vLLM's scheduler and sampler, which only its own steps
show. A step that drafts nothing at all is timed apart (the median of such steps): vLLM's
speculative path (rejection sampler, logits at every drafted position, our top-k) costs a step
something as soon as one token is drafted, so the line through drafted steps does not say what
drafting nothing costs, and a first drafted token is dearer than the line's slope. Until a
batch size has :attr:`StepCost.min_samples` drafted steps at two token counts, the nearest
batch size's fit is used, else every chain is verified whole.

The estimator learns from every node whose parent was accepted, cut nodes included: under greedy
verification a cut node would have been accepted exactly when its token is the one committed at
its depth (:func:`~racer_bench.engine.schedule.scheduler.counterfactual_trials`), so a node judged
poor
is still tested and its estimate can recover.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from racer_bench.engine.schedule.acceptance import Bucket, node_features, survival
from racer_bench.engine.schedule.scheduler import (
    ConfidenceOptions,
    counterfactual_trials,
    drafter_priors,
)
from racer_bench.engine.structs import Draft


@dataclass(frozen=True)
class StepCurve:
    """A batch size's step cost: ``intercept + per_token * tokens`` when anything is drafted,
    ``zero`` seconds when nothing is (None: not measured yet, the line stands in)."""

    intercept: float
    per_token: float
    zero: float | None = None

    def costs(self, batch: int, max_drafted: int) -> np.ndarray:
        """FloatArray[max_drafted + 1]: seconds of a step that verifies ``k`` drafted tokens."""
        out = self.intercept + self.per_token * (batch + np.arange(max_drafted + 1, dtype=float))
        if self.zero is not None:
            out[0] = self.zero
        return out


@dataclass
class StepCost:
    """Seconds per vLLM step per batch size, fitted online (:class:`StepCurve`).

    Attributes:
        window: the most recent steps kept per batch size.
        min_samples: drafted steps a batch size needs before its line is used.
        min_zero: steps without a drafted token before their median is used.
    """

    window: int = 256
    min_samples: int = 12
    min_zero: int = 3
    samples: dict[int, deque[tuple[int, float]]] = field(default_factory=dict)

    def observe(self, batch: int, tokens: int, seconds: float) -> None:
        """One pure decode step of ``batch`` requests that verified ``tokens`` positions."""
        self.samples.setdefault(batch, deque(maxlen=self.window)).append((tokens, seconds))

    def curve(self, batch: int) -> StepCurve | None:
        """The cost of a step of ``batch`` requests (the nearest fitted batch size's line when
        it has none); None when no batch size has enough drafted steps at two token counts."""
        fitted = {b: fit for b in self.samples if (fit := self._line(b)) is not None}
        if not fitted:
            return None
        intercept, per_token = fitted[min(fitted, key=lambda b: (abs(b - batch), -b))]
        zero = [t for n, t in self.samples.get(batch, ()) if n <= batch]
        median = float(np.median(zero)) if len(zero) >= self.min_zero else None
        return StepCurve(intercept, per_token, median)

    def _line(self, batch: int) -> tuple[float, float] | None:
        """Least squares over the drafted steps' median seconds per token count, weighted by
        its steps (the medians shrug off a step slowed by something else)."""
        steps = [(n, t) for n, t in self.samples.get(batch, ()) if n > batch]
        if len(steps) < self.min_samples:
            return None
        by_count: dict[int, list[float]] = {}
        for tokens, seconds in steps:
            by_count.setdefault(tokens, []).append(seconds)
        if len(by_count) < 2:
            return None
        n = np.array(list(by_count), dtype=float)
        t = np.array([np.median(v) for v in by_count.values()])
        w = np.array([len(v) for v in by_count.values()], dtype=float)
        n_mean, t_mean = np.average(n, weights=w), np.average(t, weights=w)
        slope = np.sum(w * (n - n_mean) * (t - t_mean)) / np.sum(w * (n - n_mean) ** 2)
        slope = max(float(slope), 0.0)  # more tokens never cost less
        return float(t_mean - slope * n_mean), slope


def allocate(survivals: Sequence[Sequence[float]], curve: StepCurve) -> list[int]:
    """Kept chain length per request that maximises expected tokens per second.

    Args:
        survivals: per request, S of each chain node in chain order (non-increasing).
        curve: the step's cost by drafted tokens.
    Returns:
        per request, how many leading nodes of its chain to verify. Among equal values the
        longer choice wins, so a flat cost keeps every chain whole.
    """
    b = len(survivals)
    order = sorted(
        ((s, r, j) for r, chain in enumerate(survivals) for j, s in enumerate(chain)),
        key=lambda x: (-x[0], x[1], x[2]),
    )
    gains = np.concatenate([[float(b)], [s for s, _, _ in order]])
    values = np.cumsum(gains) / np.maximum(curve.costs(b, len(order)), 1e-12)
    k = int(np.flatnonzero(values >= values.max() * (1.0 - 1e-12))[-1])
    kept = [0] * b
    for _, r, j in order[:k]:  # decreasing survival admits a chain's nodes in chain order
        kept[r] = max(kept[r], j + 1)
    return kept


@dataclass
class ChainEstimate:
    """A request's uncut chain with what the estimator needs to learn from its outcome."""

    chain: Draft
    features: list[Bucket]
    priors: list[float | None] | None
    survival: list[float]


class BatchBudget:
    """Cuts each step's chains to the batch's best expected tokens per second (module doc).

    Args:
        options: the confidence scheduler's estimator settings (``prior_mean`` ...).
        cost: the step-cost fit (default: a fresh :class:`StepCost`).
    """

    def __init__(self, options: ConfidenceOptions | None = None, cost: StepCost | None = None):
        self.options = options or ConfidenceOptions()
        self.cost = cost or StepCost()
        self.estimator = self.options.estimator()
        self._clock: tuple[float, int, frozenset[str]] | None = None  # (time, tokens, requests)

    def estimate(self, chain: Draft) -> ChainEstimate:
        """Survival per node of an uncut chain (node ``i``'s parent is ``i - 1``)."""
        features = node_features(chain, self.options.max_depth)
        priors = drafter_priors(chain) if self.options.score_prior else None
        p = self.estimator.estimate(features, 0.0, priors)
        return ChainEstimate(chain, features, priors, survival(chain.parents.tolist(), p))

    def learn(self, estimate: ChainEstimate, accepted: int, committed: Sequence[int]) -> None:
        """Count the outcome of the chain's nodes: ``accepted`` leading nodes were accepted and
        ``committed`` tokens were committed (cut nodes are judged against them)."""
        chain = estimate.chain
        outcomes = counterfactual_trials(chain.parents.tolist(), chain.tokens.tolist(),
                                         list(range(accepted)), committed)  # fmt: skip
        self.estimator.count(estimate.features, outcomes, estimate.priors)

    def tick(self, now: float, requests: frozenset[str], pure: bool) -> None:
        """The proposer was called at ``now`` for ``requests``; a pure decode step since the
        last call (the same requests, none new) is one sample of the step cost."""
        if self._clock is not None and pure and self._clock[2] == requests:
            last, tokens, _ = self._clock
            self.cost.observe(len(requests), tokens, now - last)
        self._clock = (now, 0, requests)

    def cut(self, estimates: Sequence[ChainEstimate | None]) -> list[int]:
        """Per batch row, how many nodes of its chain to verify (rows without a chain: 0); the
        verified tokens are remembered for the next :meth:`tick`."""
        present = [(i, e.survival) for i, e in enumerate(estimates) if e is not None]
        rows = [survivals for _, survivals in present]
        curve = self.cost.curve(len(rows))
        kept = [0] * len(estimates)
        for (i, _), k in zip(present, [len(r) for r in rows] if curve is None
                             else allocate(rows, curve), strict=True):  # fmt: skip
            kept[i] = k
        if self._clock is not None:
            now, _, requests = self._clock
            tokens = sum(1 + k for e, k in zip(estimates, kept, strict=True) if e is not None)
            self._clock = (now, tokens, requests)
        return kept
