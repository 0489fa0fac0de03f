"""Signals during a run: SIGTERM stops a run like Ctrl-C, and no signal lands inside a write.

Python raises ``KeyboardInterrupt`` for SIGINT between two bytecodes, so a record written by
several calls could be cut in half; :func:`signals_deferred` holds SIGINT and SIGTERM back
until the write is done and then delivers them. Only SIGKILL (no handler can run) can still
tear a line; :func:`racer_bench.record.folder.drop_torn_tail` repairs that on resume.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C's KeyboardInterrupt so one code path stops the run."""

    signum = signal.SIGTERM


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()  # signal handlers live there


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block SIGTERM raises :class:`Terminated` (exit status 143 at the CLI)."""
    if not _in_main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends, then deliver them (in arrival order)."""
    if not _in_main_thread():
        yield
        return
    pending: list[int] = []
    previous = {s: signal.signal(s, lambda n, _f: pending.append(n)) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(pending):
            signal.raise_signal(signum)
