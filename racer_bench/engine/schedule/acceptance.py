"""Online acceptance estimates for draft nodes: p(v) = P(v accepted | its parent accepted).

Every node is described by features the drafter already supplies (:func:`node_features`):
its source, its depth, its rank inside the top-k list it came from and its drafter score
(``Draft.score``, bucketed on a half-log2 scale, so match lengths, counts and probabilities all
fall into a handful of buckets). Statistics are kept at several levels, fine to coarse
(:data:`LEVELS`): (source, depth, rank, score) -> (source, depth, score) -> (source, depth) ->
(source) -> everything.

Each bucket's estimate is the posterior mean of a Beta prior of strength ``m``
(``backoff_strength``) centred on what the rest of its coarser bucket says (hierarchical
back-off): with ``s`` of ``n`` trials accepted in the bucket and ``S`` of ``N`` in its coarser
bucket (which contains them),

    p = (s + m * q) / (n + m),    q = (S - s + m * q') / (N - n + m),   ...
    top: q = (S_all - s_source + a) / (N_all - n_source + a + b)

where ``q'`` is the same recursion one level up and ``Beta(a, b)`` is the top prior (mean
``prior_mean``, strength ``a + b = prior_strength``). Every trial is counted once: a level
that does not split its coarser bucket (say, no node has a rank) adds nothing, and a bucket
with no data of its own takes its siblings' estimate. A fine bucket with little data
therefore follows its coarser bucket, and one with much data follows its own counts.

A trial is a verified node whose parent was accepted (or is the root); it succeeds when the
node itself was accepted. Nodes whose parent was rejected say nothing about p(v).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from racer_bench.engine.structs import Draft
from racer_bench.engine.tree import node_depths
from racer_bench.errors import ConfigError

Bucket = tuple[int, ...]
# Feature positions kept at each level, finest first: (source, depth, rank, score).
LEVELS: tuple[tuple[int, ...], ...] = ((0, 1, 2, 3), (0, 1, 3), (0, 1), (0,), ())
NO_VALUE = -(10**6)  # the bucket of a missing rank or score


def rank_bucket(rank: int) -> int:
    """0, 1, 2, 3 as they are; then 4-7 -> 4, 8-15 -> 8, ...; negative (no rank) -> NO_VALUE."""
    if rank < 0:
        return NO_VALUE
    return rank if rank < 4 else 1 << (rank.bit_length() - 1)


def score_bucket(score: float) -> int:
    """Half-log2 bucket of a score: floor(2 * log2(score)) for score > 0.

    Integer match lengths 1, 2, 3, 4 fall into buckets 0, 2, 3, 4; probabilities 0.9, 0.5, 0.1
    into -1, -2, -7. Zero, negative and NaN scores get buckets of their own.
    """
    if score is None or math.isnan(score):
        return NO_VALUE
    if score <= 0:
        return NO_VALUE + 1 if score == 0 else NO_VALUE + 2 + min(64, int(-score))
    return max(-64, min(64, math.floor(2 * math.log2(score))))


def node_features(draft: Draft, max_depth: int = 12) -> list[Bucket]:
    """(source, depth, rank bucket, score bucket) per node; depth capped at ``max_depth``."""
    n = len(draft)
    depths = node_depths(draft.parents.tolist())
    sources = draft.source.tolist() if draft.source is not None else [0] * n
    ranks = draft.rank.tolist() if draft.rank is not None else [-1] * n
    scores = draft.score.tolist() if draft.score is not None else [math.nan] * n
    return [
        (int(sources[i]), min(depths[i], max_depth), rank_bucket(int(ranks[i])),
         score_bucket(float(scores[i])))
        for i in range(n)
    ]  # fmt: skip


def trials(parents: Sequence[int], accepted: Sequence[int]) -> list[tuple[int, bool]]:
    """(node, accepted?) for every node whose parent is the root or accepted."""
    on_path = set(accepted)
    return [(i, i in on_path) for i, p in enumerate(parents) if p < 0 or p in on_path]


@dataclass
class AcceptanceEstimator:
    """Bucketed Beta estimates of p(v), updated from verification outcomes.

    Attributes:
        prior_mean: mean of the top-level Beta prior (before any outcome).
        prior_strength: a + b of the top-level prior (pseudo-trials).
        backoff_strength: pseudo-trials a bucket borrows from its coarser bucket.
        max_depth: depth feature cap (deeper nodes share one bucket).
    """

    prior_mean: float = 0.5
    prior_strength: float = 2.0
    backoff_strength: float = 4.0
    max_depth: int = 12
    counts: list[dict[Bucket, list[float]]] = field(default_factory=list)
    prior_counts: dict[Bucket, list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0.0 < self.prior_mean < 1.0:
            raise ConfigError(f"scheduler.prior_mean={self.prior_mean}: must be in (0, 1)")
        for key in ("prior_strength", "backoff_strength"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"scheduler.{key}={getattr(self, key)}: must be > 0")
        self.reset()

    def reset(self) -> None:
        """Forget every outcome."""
        self.counts = [{} for _ in LEVELS]
        self.prior_counts = {}

    @staticmethod
    def keys(features: Bucket) -> list[Bucket]:
        """The node's bucket at every level, finest first."""
        return [tuple(features[j] for j in level) for level in LEVELS]

    def posterior(self, features: Bucket, prior: float | None = None) -> tuple[float, float]:
        """(p, pseudo-trials behind it) for one node's features (see the module docstring).

        ``prior``: the drafter's own probability for the node; when given, the finest bucket
        backs off to it, recalibrated by the node's (source, depth) (see
        :meth:`calibrated_prior`), instead of to the coarser buckets.
        """
        cells = [self.counts[level].get(key, (0.0, 0.0)) for level, key in
                 enumerate(self.keys(features))]  # fmt: skip
        m = self.backoff_strength
        s, n = cells[0]
        if prior is not None:
            return (s + m * self.calibrated_prior(features, prior)) / (n + m), n + m
        # the top level: everything outside the node's source bucket, under the top prior
        (s_src, n_src), (s_all, n_all) = cells[-2], cells[-1]
        q = (s_all - s_src + self.prior_mean * self.prior_strength) / (
            n_all - n_src + self.prior_strength
        )
        for (s_in, n_in), (s_out, n_out) in zip(cells[:-2][::-1], cells[1:-1][::-1], strict=True):
            q = (s_out - s_in + m * q) / (n_out - n_in + m)  # the coarser bucket minus this one
        return (s + m * q) / (n + m), n + m

    def calibrated_prior(self, features: Bucket, prior: float) -> float:
        """The drafter's probability times the realised / predicted ratio of its (source, depth).

        A drafter's probabilities are rarely calibrated (RACER's retrieval counts are
        over-confident deep in a copied passage, its logits under-confident), and a finest
        bucket sees few trials per prompt. Every trial of one (source, depth) with a drafter
        probability says how far those probabilities are off, so the correction is learnt
        within a few steps and the drafter's ranking inside the bucket is kept:
        ``prior * (A + m) / (P + m)`` (at most 0.99) with ``A`` accepted trials whose
        probabilities summed to ``P``.
        """
        accepted, predicted = self.prior_counts.get((features[0], features[1]), (0.0, 0.0))
        m = self.backoff_strength
        return min(0.99, prior * (accepted + m) / (predicted + m))

    def estimate(
        self,
        features: Sequence[Bucket],
        explore: float = 0.0,
        priors: Sequence[float | None] | None = None,
    ) -> list[float]:
        """p(v) per node; ``explore`` adds that many posterior standard deviations (capped at 1).

        ``priors``: per node, the drafter's probability to back off to (None: the buckets).
        """
        memo: dict[tuple[Bucket, float | None], float] = {}
        out = []
        for i, f in enumerate(features):
            prior = priors[i] if priors is not None else None
            if (f, prior) not in memo:
                p, weight = self.posterior(f, prior)
                if explore > 0:
                    p = min(1.0, p + explore * math.sqrt(p * (1.0 - p) / (weight + 1.0)))
                memo[(f, prior)] = p
            out.append(memo[(f, prior)])
        return out

    def update(
        self,
        features: Sequence[Bucket],
        parents: Sequence[int],
        accepted: Sequence[int],
        priors: Sequence[float | None] | None = None,
    ) -> None:
        """Count the outcome of every node whose parent was accepted (see :func:`trials`)."""
        self.count(features, trials(parents, accepted), priors)

    def count(
        self,
        features: Sequence[Bucket],
        outcomes: Sequence[tuple[int, bool]],
        priors: Sequence[float | None] | None = None,
    ) -> None:
        """Count (node, accepted?) trials; ``features`` and ``priors`` are indexed by node."""
        for node, success in outcomes:
            for level, key in enumerate(self.keys(features[node])):
                cell = self.counts[level].setdefault(key, [0.0, 0.0])
                cell[0] += success
                cell[1] += 1.0
            prior = priors[node] if priors is not None else None
            if prior is not None:
                cell = self.prior_counts.setdefault(features[node][:2], [0.0, 0.0])
                cell[0] += success
                cell[1] += prior


def survival(parents: Sequence[int], p: Sequence[float]) -> list[float]:
    """S(v) = product of p along the path from the root to v (parents come first)."""
    out: list[float] = []
    for i, parent in enumerate(parents):
        out.append(p[i] * (out[parent] if parent >= 0 else 1.0))
    return out
