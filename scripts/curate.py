"""Copy finished run folders into ``results/curated/<name>/``, without machine paths.

    python scripts/curate.py results/racer_main/2026-12-01_07-00-00 --name racer_main
    python scripts/curate.py results/racer_main/<sweep>/* --name racer_main

Each run folder's records (``prompts.jsonl``, ``summary.json``, ``manifest.json``,
``cost_profile.json``, ``cli.log``, ``.hydra/*.yaml``) are copied to
``results/curated/<name>/<run folder name>/`` (or ``results/curated/<name>/`` for ``--flat``
with one run). The data directory becomes ``<data_dir>``, the home folder ``~`` and the
repository root ``.``, so committed records name no machine. Unfinished runs (``INCOMPLETE``)
are refused: a table must not be built from half a run.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from racer_bench.analysis.curation import curate
from racer_bench.config.paths import REPO_ROOT


def main(argv: Sequence[str] | None = None) -> list[Path]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="finished run folders")
    parser.add_argument("--name", required=True, help="folder under results/curated/")
    parser.add_argument("--flat", action="store_true", help="one run, copied to <name>/ itself")
    parser.add_argument("--curated", type=Path, default=REPO_ROOT / "results" / "curated")
    args = parser.parse_args(argv)
    runs = [r for r in args.runs if r.is_dir()]
    if args.flat and len(runs) != 1:
        sys.exit("error: --flat takes exactly one run folder")
    base = args.curated / args.name
    out = []
    for run in runs:
        dest = base if args.flat else base / run.name
        if dest.exists() and not args.flat:
            shutil.rmtree(dest)
        out.append(curate(run, dest))
        print(f"curated {run} -> {dest}")
    return out


if __name__ == "__main__":
    main()
