"""One writer per run folder: an exclusive ``flock`` on ``<run folder>/.lock``, which holds the pid.

The kernel drops a flock when its process dies, however it dies (SIGKILL included), so a lock
file left behind by a dead process is simply taken over; the pid written inside only names the
live holder in the error message. (Judging staleness by the pid alone would be fooled by pid
reuse.) The lock file is removed on release; a process that opened it just before that notices
the file it locked is no longer the one at the path and tries again.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from racer_bench.errors import ConfigError

LOCK_FILE = ".lock"


@contextmanager
def hold(run_dir: Path | str) -> Iterator[None]:
    """Hold ``run_dir``'s lock for the block; a live holder elsewhere raises ConfigError."""
    path = Path(run_dir) / LOCK_FILE
    fd = _acquire(path)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
        os.close(fd)


def check_free(run_dir: Path | str) -> None:
    """Raise ConfigError if a live process holds ``run_dir`` (nothing is created or kept)."""
    path = Path(run_dir) / LOCK_FILE
    if not path.exists():
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _in_use(path, fd) from None
    finally:
        os.close(fd)


def _acquire(path: Path) -> int:
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            error = _in_use(path, fd)
            os.close(fd)
            raise error from None
        if _is_current(fd, path):
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        os.close(fd)  # released and removed meanwhile: lock the new file instead


def _is_current(fd: int, path: Path) -> bool:
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (now.st_ino, now.st_dev) == (held.st_ino, held.st_dev)


def _in_use(path: Path, fd: int) -> ConfigError:
    pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
    return ConfigError(
        f"run folder {path.parent} is in use by process {pid} (lock {path}); "
        "wait for it to finish or stop it"
    )
