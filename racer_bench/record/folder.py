"""Run folders: ``manifest.json``, ``prompts.jsonl`` (one line per prompt), ``summary.json``.

The run folder is the source of truth: tables, plots and W&B all read from it.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from racer_bench.engine.structs import Source, StepRecord
from racer_bench.system import files, hardware
from racer_bench.system.interrupts import signals_deferred

SCHEMA_VERSION = 1
PROMPTS_FILE = "prompts.jsonl"
SUMMARY_FILE = "summary.json"
MANIFEST_FILE = "manifest.json"
INCOMPLETE_FILE = "INCOMPLETE"  # present while a run has not finished
STEP_KEYS = ("n_draft", "depth", "n_accepted", "n_committed", "t_draft", "t_verify", "t_update",
             "n_relaxed", "regret")  # fmt: skip
SCHEDULER_KEYS = ("n_candidates", "predicted_accepted", "cost")  # written when a step has them


def turn_record(
    tokens: list[int],
    text: str,
    stop_reason: str | None,
    *,
    prefill_time: float = 0.0,
    decode_time: float | None = None,
    wall_time: float | None = None,
    steps: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One turn as every record keeps it: tokens, text, timings, why it stopped and the
    column-wise ``steps`` block. A contender that does not split prefill from decode
    (``generate()``) gives ``wall_time`` instead (read by :func:`metrics.wall_time`)."""
    record: dict[str, Any] = {"tokens": tokens, "text": text}
    if wall_time is not None:
        record["wall_time"] = wall_time
    else:
        record |= {"prefill_time": prefill_time, "decode_time": decode_time or 0.0}
    record["stop_reason"] = stop_reason
    if steps is not None:
        record["steps"] = steps
    return record


def step_columns_of(steps: Sequence[StepRecord]) -> dict[str, Any]:
    """The column-wise ``steps`` block of a decode loop's steps (scheduler keys when set)."""
    columns: dict[str, Any] = {key: [getattr(s, key) for s in steps] for key in STEP_KEYS}
    columns["has_retrieval"] = [int(s.has_retrieval) for s in steps]
    columns["accepted_retrieval"] = [
        s.accepted_by_source.get(int(Source.RETRIEVAL), 0) for s in steps
    ]
    columns["accepted_ranks"] = [s.accepted_ranks for s in steps]
    meta_keys = sorted({k for s in steps for k in s.meta})
    columns["meta"] = {k: [s.meta.get(k) for s in steps] for k in meta_keys}
    for key in SCHEDULER_KEYS:
        values = [getattr(s, key) for s in steps]
        if any(v is not None for v in values):  # floats rounded: predictions, not measurements
            columns[key] = [round(v, 4) if isinstance(v, float) else v for v in values]
    return columns


def append_prompt(run_dir: Path, record: dict[str, Any]) -> None:
    """Append one prompt line, written as soon as the prompt finishes.

    The line goes out in ``write`` calls on an ``O_APPEND`` descriptor with SIGINT and SIGTERM
    held back (:func:`racer_bench.system.interrupts.signals_deferred`), so Ctrl-C or a SIGTERM never
    leaves half a line. Only SIGKILL can tear the last line; the loader skips it and
    :func:`drop_torn_tail` cuts it off before a resumed run appends.
    """
    data = memoryview((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
    with signals_deferred():
        fd = os.open(Path(run_dir) / PROMPTS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            while data:
                data = data[os.write(fd, data) :]
        finally:
            os.close(fd)


def load_prompts(run_dir: Path) -> list[dict[str, Any]]:
    """The prompt records of a run folder, one per prompt id, read from complete lines only.

    A torn last line (no final newline: its writer was killed mid-append) is never read. When an
    id has several lines (a resumed run redoes the prompts that failed), the last one counts,
    at the place of the first.
    """
    path = Path(run_dir) / PROMPTS_FILE
    if not path.exists():
        return []
    data = path.read_bytes()
    records: dict[Any, dict[str, Any]] = {}
    for number, line in enumerate(data[: data.rfind(b"\n") + 1].splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            warnings.warn(f"{path}:{number}: unreadable line skipped", stacklevel=2)
            continue
        records[record.get("id", f"line {number}")] = record
    return list(records.values())


def repeat_id(prompt_id: str, repeat: int) -> str:
    """A prompt line's id: the prompt's own for the first repeat, ``<id>#r<repeat>`` after."""
    return prompt_id if repeat == 0 else f"{prompt_id}#r{repeat}"


def finished_ids(run_dir: Path) -> set[str]:
    """Ids of the prompts a run folder holds with status ``ok`` (a resumed run skips them)."""
    return {r["id"] for r in load_prompts(run_dir) if r.get("status") == "ok"}


def drop_torn_tail(run_dir: Path) -> Path | None:
    """Cut a torn last line off ``prompts.jsonl`` and keep it beside the file.

    Returns the copy (``prompts.jsonl.torn-<n>``), or None when the file ends with a newline.
    Call it before appending to a folder whose writer may have been killed, or the next line
    would be glued to the torn one.
    """
    path = Path(run_dir) / PROMPTS_FILE
    if not path.exists():
        return None
    size = path.stat().st_size
    end = end_of_last_line(path, size)
    if end == size:
        return None
    copy = path.with_name(f"{path.name}.torn-1")
    while copy.exists():  # every torn line is kept
        copy = path.with_name(f"{path.name}.torn-{int(copy.name.rsplit('-', 1)[1]) + 1}")
    with open(path, "rb") as f:
        f.seek(end)
        copy.write_bytes(f.read())
    os.truncate(path, end)
    return copy


def end_of_last_line(path: Path, size: int, chunk: int = 1 << 20) -> int:
    """Offset just after the last newline of the first ``size`` bytes of ``path`` (0: none)."""
    with open(path, "rb") as f:
        pos = size
        while pos > 0:
            start = max(0, pos - chunk)
            f.seek(start)
            newline = f.read(pos - start).rfind(b"\n")
            if newline >= 0:
                return start + newline + 1
            pos = start
    return 0


def write_json(path: Path, data: dict[str, Any]) -> None:
    files.write_text(path, json.dumps(data, indent=2, ensure_ascii=False, default=str))


def read_json(path: Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


# Folders whose changes leave the code as committed: records and prose. A table made right after
# another (reproduce curates and regenerates docs) still runs committed code.
NOT_CODE = ("results", "docs")


def git_state(repo: Path) -> dict[str, Any]:
    """Commit sha and dirty flag of the source tree, records and docs aside (:data:`NOT_CODE`;
    None outside a git checkout)."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
        except OSError:
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    sha = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--", ".", *(f":!{p}" for p in NOT_CODE))
    return {"git_sha": sha, "git_dirty": bool(status) if status is not None else None}


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for name in ("racer_bench", "torch", "transformers", "hydra-core", "numpy"):
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = "absent"
    return versions


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu:{platform.processor() or platform.machine()} x{torch.get_num_threads()} threads"


def manifest(fields: dict[str, Any], repo: Path) -> dict[str, Any]:
    """Everything needed to trace a number back to code, data and hardware.

    ``hardware`` is the machine's fingerprint (:func:`racer_bench.system.hardware.fingerprint`)
    unless ``fields`` brings one.
    """
    return {
        "schema_version": SCHEMA_VERSION,
        **git_state(repo),
        "versions": package_versions(),
        "python": platform.python_version(),
        "hardware": hardware.fingerprint(fields.get("threads")),
        **fields,
    }
