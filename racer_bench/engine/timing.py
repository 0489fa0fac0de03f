"""Wall-clock timing that waits for the device first, so queued GPU work is counted."""

from __future__ import annotations

import time
from collections.abc import Callable


class SyncedClock:
    """``now()`` = ``perf_counter`` after a device synchronisation."""

    def __init__(self, synchronize: Callable[[], None]) -> None:
        self._synchronize = synchronize

    def now(self) -> float:
        self._synchronize()
        return time.perf_counter()
