"""Training time that leaves out pauses: :class:`ActiveClock`."""

from __future__ import annotations

import time


class ActiveClock:
    """Training seconds that leave out pauses (a SIGSTOP while a benchmark has the CPU).

    A step that takes over ``PAUSE_FACTOR`` times the median of the recent steps counts as that
    median, so ``train.max_minutes`` measures training, not time spent stopped.
    """

    PAUSE_FACTOR = 20.0

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds
        self._recent: list[float] = []
        self._t0 = 0.0

    def start(self) -> None:
        self._t0 = time.perf_counter()

    def stop(self) -> float:
        """End a step; returns the seconds counted for it."""
        dt = time.perf_counter() - self._t0
        if len(self._recent) >= 5:
            median = sorted(self._recent)[len(self._recent) // 2]
            if dt > self.PAUSE_FACTOR * median:
                dt = median
        self._recent = [*self._recent, dt][-50:]
        self.seconds += dt
        return dt
