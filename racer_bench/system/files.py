"""Whole-file writes: a reader never sees half a file, and two writers never share a temp file.

Caches under ``$RACER_BENCH_CACHE`` (kernel verdicts, read bandwidth, engine choices, cost
profiles) are written by whichever process measures first; parallel test workers, Hydra
launchers running jobs side by side, and two runs started together all measure at once. Each
writer gets its own temporary name (pid and thread), and the rename onto the final name is
atomic, so the last complete write wins and nothing half-written is ever read.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def replacing(path: Path | str) -> Iterator[Path]:
    """A temporary path beside ``path``; whatever the block writes there replaces ``path``
    when it ends without an error (on an error it is removed and ``path`` is untouched)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        yield tmp
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: Path | str, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_bytes(path: Path | str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with replacing(path) as tmp:
        tmp.write_bytes(data)
