"""Recompute a run folder's ``summary.json`` from its ``prompts.jsonl`` with today's metrics.

A summary is written once, when its run ends; a later fix to a metric (e.g. the per-step cap
of ``retrieval_accept_share``) leaves committed summaries stale. :func:`stale_keys` says which
numbers of a stored summary today's code no longer gives, :func:`resummarize` rewrites it
(keeping what is not recomputed: ``metric``, ``run_dir``, ``load``, ``hardware``...).

    python -m racer_bench.analysis.resummarize results/curated        # rewrite the stale ones
    python -m racer_bench.analysis.resummarize results/curated --check
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from racer_bench.analysis.runs import find_run_dirs, load_run
from racer_bench.record import folder as records


def recomputed(run_dir: Path) -> dict[str, Any]:
    """Today's summary of the run folder's prompt lines, as JSON would hold it."""
    summary = load_run(run_dir).summary
    return json.loads(json.dumps(summary, default=str))


def _same(a: Any, b: Any, rel: float = 1e-9) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], rel) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y, rel) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)
    return a == b


def stale_keys(run_dir: Path) -> list[str]:
    """Keys of the stored summary that today's metrics compute differently (or add)."""
    stored = records.read_json(Path(run_dir) / records.SUMMARY_FILE)
    fresh = recomputed(Path(run_dir))
    return sorted(k for k, v in fresh.items() if k not in stored or not _same(stored[k], v))


def resummarize(run_dir: Path) -> list[str]:
    """Rewrite ``summary.json`` with today's metrics when stale; returns the keys changed."""
    keys = stale_keys(run_dir)
    if keys:
        path = Path(run_dir) / records.SUMMARY_FILE
        records.write_json(path, records.read_json(path) | recomputed(Path(run_dir)))
    return keys


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path, help="run folders or folders holding them")
    parser.add_argument("--check", action="store_true", help="only list the stale summaries")
    args = parser.parse_args(argv)
    stale = 0
    for root in args.paths:
        for run_dir in find_run_dirs(root):
            if not (run_dir / records.SUMMARY_FILE).exists():
                continue
            keys = stale_keys(run_dir) if args.check else resummarize(run_dir)
            if keys:
                stale += 1
                print(f"{run_dir}: {'stale' if args.check else 'rewritten'}: {', '.join(keys)}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
