"""A cost curve that follows the machine during a run (``scheduler.follow_cost``).

The profile (:mod:`racer_bench.engine.schedule.cost`) is measured once, in one state of the
machine. On a shared host that state moves within minutes (docs/bench/cost_drift_*.md: the AR
step moves by a third while a 16-token step does not, so cost(16) is 2.6-3.3 in one state and
1.8-2.2 in the other), and the context grows during a generation, which makes big forwards
dearer than the profile's fixed context says.

:class:`CostFollower` keeps, at each size of the profile's grid, an exponentially weighted mean
of log(measured seconds / profile cost) over the run's verification forwards; each forward
counts at the two grid sizes around its own, in proportion to how near it is. The curve the
scheduler reads is the profile times exp(correction(N) - correction(1)):

* a factor common to all sizes (the whole machine slower or faster) cancels, so only the curve's
  shape moves, and only where forwards were measured: a size with too little weight takes the
  correction of the nearest measured sizes (linear between them, constant beyond), so with a
  single size measured the curve is the profile's;
* old forwards fade (``half_life`` forwards), so the curve follows a state that changes and
  forgets one that has passed;
* the result is a :class:`~racer_bench.engine.schedule.cost.CostProfile` again (monotone,
  cost(1) = 1), so timing noise never makes a bigger tree look cheaper.

A scheduler only removes nodes, so following changes which nodes are verified, never what is
committed: every method stays exactly as lossless as without it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from racer_bench.engine.schedule.cost import CostProfile

MIN_WEIGHT = 2.0  # effective forwards at a grid size before its own correction counts


@dataclass
class CostFollower:
    """The profile ``base`` corrected by the forwards this run has timed.

    Attributes:
        base: the measured (or given) cost curve.
        half_life: forwards after which a timed forward's weight has halved.
        observed: forwards timed so far.
    """

    base: CostProfile
    half_life: float = 128.0
    observed: int = 0
    _sums: np.ndarray = field(init=False, repr=False)
    _weights: np.ndarray = field(init=False, repr=False)
    _curve: CostProfile | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._sums = np.zeros(len(self.base.sizes))
        self._weights = np.zeros(len(self.base.sizes))

    def observe(self, size: int, seconds: float) -> None:
        """Count one verification forward of ``size`` tokens that took ``seconds``."""
        if size < 1 or not math.isfinite(seconds) or seconds <= 0:
            return
        decay = 0.5 ** (1.0 / self.half_life)
        self._sums *= decay
        self._weights *= decay
        share = grid_shares(self.base.sizes, size)
        self._sums += share * math.log(seconds / self.base(size))
        self._weights += share
        self.observed += 1
        self._curve = None

    def corrections(self) -> np.ndarray | None:
        """log correction at every grid size (FloatArray[len(base.sizes)]), relative to size 1,
        or None while fewer than two sizes have enough weight to shape the curve."""
        have = self._weights >= MIN_WEIGHT
        if have.sum() < 2:
            return None
        sizes = np.asarray(self.base.sizes, dtype=float)
        means = self._sums[have] / self._weights[have]
        at = np.interp(sizes, sizes[have], means)
        return at - at[0]

    @property
    def profile(self) -> CostProfile:
        """The curve to schedule with: ``base`` until two sizes have been measured enough."""
        if self._curve is None:
            corrections = self.corrections()
            if corrections is None:
                self._curve = self.base
            else:
                costs = np.asarray(self.base.costs) * np.exp(corrections)
                meta = {"source": "followed", "base": self.base.meta.get("source"),
                        "forwards": self.observed, "half_life": self.half_life}  # fmt: skip
                self._curve = CostProfile(list(self.base.sizes), costs.tolist(), meta)
        return self._curve


def grid_shares(sizes: list[int], size: float) -> np.ndarray:
    """How one forward of ``size`` tokens counts at each grid size (FloatArray[len(sizes)],
    summing to 1): linear between the two grid sizes around it, all at an end beyond it."""
    grid = np.asarray(sizes, dtype=float)
    share = np.zeros(len(grid))
    if size <= grid[0]:
        share[0] = 1.0
    elif size >= grid[-1]:
        share[-1] = 1.0
    else:
        upper = int(np.searchsorted(grid, size))
        lower = upper - 1
        t = (size - grid[lower]) / (grid[upper] - grid[lower])
        share[lower], share[upper] = 1.0 - t, t
    return share
