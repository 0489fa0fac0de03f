"""Run folders: ``manifest.json``, ``prompts.jsonl`` (one line per prompt), ``summary.json``.

The run folder is the source of truth: tables, plots and W&B all read from it.
"""

from __future__ import annotations

import json
import platform
import subprocess
from pathlib import Path
from typing import Any

import torch

from racer_bench.analysis.metrics import calibration_bins
from racer_bench.engine.structs import GenerationResult, Source

SCHEMA_VERSION = 1
PROMPTS_FILE = "prompts.jsonl"
SUMMARY_FILE = "summary.json"
MANIFEST_FILE = "manifest.json"
STEP_KEYS = ("n_draft", "depth", "n_accepted", "n_committed", "t_draft", "t_verify", "t_update",
             "n_relaxed", "regret")  # fmt: skip
SCHEDULER_KEYS = ("n_candidates", "predicted_accepted", "cost")  # written when a step has them


def generation_record(result: GenerationResult) -> dict[str, Any]:
    """A JSON-ready turn: tokens, text, timings and column-wise step counters."""
    steps: dict[str, list[Any]] = {
        key: [getattr(s, key) for s in result.steps] for key in STEP_KEYS
    }
    steps["has_retrieval"] = [int(s.has_retrieval) for s in result.steps]
    steps["accepted_retrieval"] = [
        s.accepted_by_source.get(int(Source.RETRIEVAL), 0) for s in result.steps
    ]
    steps["accepted_ranks"] = [s.accepted_ranks for s in result.steps]
    meta_keys = sorted({k for s in result.steps for k in s.meta})
    steps["meta"] = {k: [s.meta.get(k) for s in result.steps] for k in meta_keys}
    for key in SCHEDULER_KEYS:
        values = [getattr(s, key) for s in result.steps]
        if any(v is not None for v in values):  # floats rounded: predictions, not measurements
            steps[key] = [round(v, 4) if isinstance(v, float) else v for v in values]
    record = {
        "tokens": result.tokens,
        "text": result.text,
        "prefill_time": result.prefill_time,
        "decode_time": result.decode_time,
        "stop_reason": result.stop_reason,
        "steps": steps,
    }
    pairs = [pair for s in result.steps for pair in s.calibration]
    if pairs:
        record["calibration"] = calibration_bins(pairs)
    return record


def append_prompt(run_dir: Path, record: dict[str, Any]) -> None:
    """Append one prompt line and flush it, so an interrupted run keeps finished prompts."""
    with open(run_dir / PROMPTS_FILE, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, ensure_ascii=False) + "\n")
        f.flush()


def load_prompts(run_dir: Path) -> list[dict[str, Any]]:
    """All prompt lines of a run folder; a torn last line (killed mid-write) is ignored."""
    path = Path(run_dir) / PROMPTS_FILE
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    tmp.replace(path)


def read_json(path: Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def git_state(repo: Path) -> dict[str, Any]:
    """Commit sha and dirty flag of the source tree (None outside a git checkout)."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
        except OSError:
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    sha = git("rev-parse", "HEAD")
    status = git("status", "--porcelain")
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
    """Everything needed to trace a number back to code, data and hardware."""
    return {
        "schema_version": SCHEMA_VERSION,
        **git_state(repo),
        "versions": package_versions(),
        "python": platform.python_version(),
        **fields,
    }
