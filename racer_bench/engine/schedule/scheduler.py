"""Schedulers sit between propose and the verification forward: they decide how much to verify.

A scheduler only removes nodes (:func:`racer_bench.engine.tree.select_nodes` on a prefix-closed
set), so every verifier stays exactly as lossless, or as lossy, as it is without one.

* :class:`FixedScheduler`: today's behaviour, the drafter's tree is verified as proposed.
* :class:`ConfidenceScheduler`: each node gets an acceptance estimate p(v) (online, from this
  run's own outcomes, :mod:`racer_bench.engine.schedule.acceptance`) and a survival S(v) = product
  of p
  along its path = P(v accepted). Nodes are admitted in decreasing survival (a parent never
  after its child) and the scheduler keeps the prefix of size k that maximises the expected
  tokens per unit of target cost,

      (1 + sum of the admitted S) / cost(1 + k + aux),

  with cost from the target's profile (:mod:`racer_bench.engine.schedule.cost`); the 1 is the bonus
  token every step commits. For each k the top-k survivals are the largest sum any
  prefix-closed set of k nodes can reach, so this prefix is optimal over all prefix-closed
  subsets (tested by brute force).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, ClassVar, Protocol, runtime_checkable

import numpy as np
from annotated_types import Interval

from racer_bench.config.schema import NonNegativeFloat, PositiveFloat, PositiveInt
from racer_bench.engine.schedule.acceptance import (
    AcceptanceEstimator,
    Bucket,
    node_features,
    survival,
)
from racer_bench.engine.schedule.cost import CostProfile
from racer_bench.engine.schedule.follow import CostFollower
from racer_bench.engine.structs import Draft
from racer_bench.engine.tree import select_nodes


@dataclass
class Plan:
    """A scheduled draft and what the scheduler predicted for it.

    Attributes:
        draft: the draft to verify (a prefix-closed sub-draft of the candidates).
        n_candidates: nodes the drafter proposed.
        survival: predicted P(accepted) per kept node (draft order), or None (no prediction).
        cost: the profile's cost of this step's forward, or None (no profile).
        features: per kept node, the buckets the estimator learns from (None: nothing to learn).
        priors: per kept node, the drafter's probability the estimate backs off to (None: none).
        candidates: the drafter's whole tree, when the scheduler cut it (else None).
        kept: candidate index of every kept node (ascending), when it was cut.
        candidate_features, candidate_priors: ``features`` and ``priors`` of every candidate,
            when it was cut.
    """

    draft: Draft
    n_candidates: int
    survival: list[float] | None = None
    cost: float | None = None
    features: list[Bucket] | None = field(default=None, repr=False)
    priors: list[float | None] | None = field(default=None, repr=False)
    candidates: Draft | None = field(default=None, repr=False)
    kept: list[int] | None = field(default=None, repr=False)
    candidate_features: list[Bucket] | None = field(default=None, repr=False)
    candidate_priors: list[float | None] | None = field(default=None, repr=False)

    @property
    def predicted_accepted(self) -> float | None:
        """Expected accepted draft tokens (bonus excluded): the sum of kept survivals."""
        return None if self.survival is None else float(sum(self.survival))


@runtime_checkable
class Scheduler(Protocol):
    """Chooses the verified part of each draft and learns from verification outcomes."""

    name: ClassVar[str]
    persist_across_prompts: bool
    times_forwards: bool  # whether learn() wants the verification forward's seconds

    def reset(self) -> None:
        """Start a new generation call (statistics are dropped unless they persist)."""

    def schedule(self, draft: Draft) -> Plan:
        """The sub-draft to verify."""

    def candidate_budget(self) -> int | None:
        """The most nodes the drafter should propose next step (None: its own size)."""

    def learn(self, plan: Plan, accepted: list[int], committed: Sequence[int] = (),
              seconds: float | None = None) -> None:  # fmt: skip
        """Learn from the accepted nodes (indices into ``plan.draft``), the committed tokens
        and the verification forward's measured ``seconds`` (None: not timed)."""


class FixedScheduler:
    """Verify every proposed node (the drafter's own capacity decides the size)."""

    name: ClassVar[str] = "fixed"
    persist_across_prompts = False
    times_forwards = False

    def reset(self) -> None:
        pass

    def schedule(self, draft: Draft) -> Plan:
        return Plan(draft, len(draft))

    def candidate_budget(self) -> int | None:
        return None

    def learn(self, plan: Plan, accepted: list[int], committed: Sequence[int] = (),
              seconds: float | None = None) -> None:  # fmt: skip
        pass


def best_prefix(
    parents: Sequence[int], surv: Sequence[float], costs: np.ndarray
) -> tuple[list[int], float]:
    """The optimal prefix-closed node set and its value.

    Args:
        parents: parent array of the candidates (topological).
        surv: survival per node (non-increasing along every path).
        costs: FloatArray[N + 1], ``costs[k]`` = cost of verifying k nodes (aux included).

    Returns:
        (kept node indices ascending, value = (1 + sum of kept survivals) / cost). Among equal
        values the larger set wins, so a flat curve keeps the whole tree.
    """
    n = len(parents)
    # decreasing survival; equal survivals keep draft order, so a parent precedes its child
    order = sorted(range(n), key=lambda i: (-surv[i], i))
    gains = np.concatenate([[1.0], np.asarray([surv[i] for i in order], dtype=float)])
    values = np.cumsum(gains) / costs[: n + 1]
    best = float(values.max())
    k = int(np.flatnonzero(values >= best * (1.0 - 1e-12))[-1])
    return sorted(order[:k]), float(values[k])


@dataclass(frozen=True)
class ConfidenceOptions:
    """How :class:`ConfidenceScheduler` estimates and admits nodes (its keys in
    ``conf/scheduler/confidence.yaml``).

    Attributes:
        persist_across_prompts: keep acceptance statistics across generation calls (default:
            reset per call, so results do not depend on prompt order).
        prior_mean, prior_strength, backoff_strength, max_depth: see
            :class:`~racer_bench.engine.schedule.acceptance.AcceptanceEstimator`.
        explore: posterior standard deviations added to p(v) when admitting nodes (optimism
            for buckets with little data; predictions in the records use the plain mean).
        learn_pruned: also learn from the candidates it cut whose parent was accepted (or is
            the root): such a node would have been accepted exactly when its token is the one
            the step committed at its depth (exact under greedy verification; under sampling,
            the chance that the target's sample is that token). Without it, a bucket judged
            poor is never verified again, so its estimate can never recover, and the
            estimates only see the nodes that were already judged good.
        score_prior: for drafts whose scores are the drafter's own acceptance probabilities
            (``Draft.score_is_probability``: RACER, DSpark), a node's estimate backs off to its
            own score (weight ``backoff_strength``) instead of to the coarser buckets, so the
            online statistics recalibrate the drafter's probabilities per bucket instead of
            replacing them with bucket averages.
        adaptive_candidates, min_candidates, candidate_window: ask the drafter for at most
            twice the largest tree kept over the last ``candidate_window`` steps, and at least
            ``min_candidates`` nodes (:meth:`ConfidenceScheduler.candidate_budget`). Where the
            cost curve is steep the scheduler keeps a few nodes of 64; building and scoring the
            rest every step is overhead. A step that keeps everything it was offered doubles
            the next offer.
        follow_cost, follow_half_life: correct the cost curve by the verification forwards
            this run times (:class:`~racer_bench.engine.schedule.follow.CostFollower`, old
            forwards halving in weight every ``follow_half_life`` forwards) when the curve was
            measured on the target (``scheduler.profile=auto``; synthetic curves and curve
            files are used as given), so the scheduler
            follows the machine's state and the growing context instead of the state and the
            context the profile was measured in. Kept across generation calls: it describes the
            machine, not the prompt.
    """

    persist_across_prompts: bool = False
    prior_mean: Annotated[float, Interval(gt=0, lt=1)] = 0.5
    prior_strength: PositiveFloat = 2.0
    backoff_strength: NonNegativeFloat = 4.0
    max_depth: PositiveInt = 12
    explore: NonNegativeFloat = 0.0
    learn_pruned: bool = True
    score_prior: bool = True
    adaptive_candidates: bool = True
    min_candidates: PositiveInt = 16
    candidate_window: PositiveInt = 16
    follow_cost: bool = False
    follow_half_life: PositiveFloat = 128.0

    def estimator(self) -> AcceptanceEstimator:
        """A fresh acceptance estimator with these settings."""
        return AcceptanceEstimator(self.prior_mean, self.prior_strength, self.backoff_strength,
                                   self.max_depth)  # fmt: skip


class ConfidenceScheduler:
    """Keeps the prefix (in decreasing survival) with the most expected tokens per cost.

    Args:
        profile: the target's cost curve (resolved from ``scheduler.profile`` by
            :mod:`racer_bench.engine.schedule.settings`).
        options: how nodes are estimated and admitted (default: the YAML's defaults).
    """

    name: ClassVar[str] = "confidence"

    def __init__(self, profile: CostProfile, options: ConfidenceOptions | None = None) -> None:
        options = options or ConfidenceOptions()
        self.options = options
        self.profile = profile
        self.persist_across_prompts = options.persist_across_prompts
        self._kept: deque[int] = deque(maxlen=options.candidate_window)
        self.estimator = options.estimator()

    @property
    def profile(self) -> CostProfile:
        """The measured (or given) cost curve; setting it (another thread count's curve)
        restarts the following."""
        return self._profile

    @profile.setter
    def profile(self, profile: CostProfile) -> None:
        self._profile = profile
        follows = self.options.follow_cost and measured(profile)
        self.follower = CostFollower(profile, self.options.follow_half_life) if follows else None

    @property
    def times_forwards(self) -> bool:
        """Only a scheduler that follows the machine needs each forward timed."""
        return self.follower is not None

    @property
    def cost(self) -> CostProfile:
        """The curve this step is scheduled with: the profile, followed when following."""
        return self.follower.profile if self.follower is not None else self._profile

    def reset(self) -> None:
        if not self.persist_across_prompts:
            self.estimator.reset()
            self._kept.clear()

    def candidate_budget(self) -> int | None:
        if not self.options.adaptive_candidates:
            return None
        return max(self.options.min_candidates, 2 * max(self._kept, default=0))

    def schedule(self, draft: Draft) -> Plan:
        n, aux = len(draft), aux_count(draft)
        if n == 0:
            return Plan(draft, 0, [], self.cost(1 + aux), [])
        parents = draft.parents.tolist()
        features = node_features(draft, self.estimator.max_depth)
        priors = self._priors(draft)
        mean = survival(parents, self.estimator.estimate(features, 0.0, priors))
        admit = mean
        if self.options.explore > 0:
            optimistic = self.estimator.estimate(features, self.options.explore, priors)
            admit = survival(parents, optimistic)
        costs = self.cost.curve(np.arange(1, n + 2, dtype=float) + aux)
        keep, _ = best_prefix(parents, admit, costs)
        plan = Plan(draft, n, [mean[i] for i in keep], float(costs[len(keep)]),
                    [features[i] for i in keep])  # fmt: skip
        plan.priors = None if priors is None else [priors[i] for i in keep]
        if len(keep) < n:
            plan.draft = select_nodes(draft, keep)
            plan.candidates, plan.kept, plan.candidate_features = draft, keep, features
            plan.candidate_priors = priors
        return plan

    def _priors(self, draft: Draft) -> list[float | None] | None:
        return drafter_priors(draft) if self.options.score_prior else None

    def learn(self, plan: Plan, accepted: list[int], committed: Sequence[int] = (),
              seconds: float | None = None) -> None:  # fmt: skip
        self._kept.append(len(plan.draft))
        if self.follower is not None and seconds is not None:
            self.follower.observe(1 + len(plan.draft) + aux_count(plan.draft), seconds)
        if plan.candidates is not None and self.options.learn_pruned and committed:
            assert plan.kept is not None and plan.candidate_features is not None
            parents = plan.candidates.parents.tolist()
            path = [plan.kept[i] for i in accepted]
            tokens = plan.candidates.tokens.tolist()
            outcomes = counterfactual_trials(parents, tokens, path, committed)
            self.estimator.count(plan.candidate_features, outcomes, plan.candidate_priors)
        elif plan.features:
            self.estimator.update(plan.features, plan.draft.parents.tolist(), accepted,
                                  plan.priors)  # fmt: skip


def aux_count(draft: Draft) -> int:
    """Tokens of the draft's aux branch, verified in the same forward as its nodes."""
    return len(draft.aux) if draft.aux is not None else 0


def measured(profile: CostProfile) -> bool:
    """Whether ``profile`` was measured on the target (``auto``): only such a curve is
    followed; synthetic curves and curve files are used as given."""
    return bool(profile.meta.get("key"))


def drafter_priors(draft: Draft) -> list[float | None] | None:
    """The drafter's own acceptance probabilities, clipped to [0.01, 0.99], when its scores are
    probabilities (``Draft.score_is_probability``); else None."""
    if not draft.score_is_probability or draft.score is None:
        return None
    return [None if math.isnan(x) else min(max(x, 0.01), 0.99) for x in draft.score.tolist()]


def counterfactual_trials(
    parents: Sequence[int], tokens: Sequence[int], accepted: Sequence[int], committed: Sequence[int]
) -> list[tuple[int, bool]]:
    """(candidate, accepted?) for every candidate whose parent is the root or was accepted.

    Args:
        parents, tokens: the candidate tree (topological).
        accepted: candidate indices the verifier accepted (a root-to-node path).
        committed: the step's committed tokens (the accepted tokens, then the bonus).

    The verifier's verdicts stand for the kept nodes. A cut node whose parent was accepted would
    have been accepted exactly when its token is the one committed at its depth (below the last
    accepted node that is the bonus; elsewhere a kept sibling took that token). Nothing is known
    about the children of such a node, so they are no trials.
    """
    on_path = set(accepted)
    depth = {-1: 0, **{node: d + 1 for d, node in enumerate(accepted)}}
    out = []
    for i, parent in enumerate(parents):
        if parent >= 0 and parent not in on_path:
            continue
        d = depth[parent]
        out.append((i, i in on_path or (d < len(committed) and tokens[i] == committed[d])))
    return out
