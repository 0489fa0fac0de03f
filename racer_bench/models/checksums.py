"""Content hashes of weight files, so a record names the weights it ran and not only their path.

:func:`content_sha256` hashes a checkpoint file, or every file of a folder (a published
checkpoint, a model folder). Each file's digest is kept per (path, mtime, size), so loading the
same unchanged checkpoint again in one process does not read it again.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

_FILE_DIGESTS: dict[tuple[str, int, int], str] = {}


def content_sha256(path: str | Path) -> str:
    """sha256 (hex) of a file's bytes; of a folder: of every file's relative name and digest,
    in name order (hidden files and folders skipped)."""
    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        return file_sha256(root)
    files = {p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.is_file()}
    digest = hashlib.sha256()
    for name in sorted(files):
        if not any(part.startswith(".") for part in name.split("/")):
            digest.update(f"{name}\0{file_sha256(files[name])}\n".encode())
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """sha256 (hex) of one file, read again only when its mtime or size changed."""
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key not in _FILE_DIGESTS:
        with path.open("rb") as handle:
            _FILE_DIGESTS[key] = hashlib.file_digest(handle, "sha256").hexdigest()
    return _FILE_DIGESTS[key]
