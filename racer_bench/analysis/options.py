"""The loading options shared by the result scripts (``--results``, ``--no-check``, ...)."""

from __future__ import annotations

import argparse
from pathlib import Path

from racer_bench.analysis.labels import latest_runs
from racer_bench.analysis.runs import IncompatibleRunsError, Run, load_runs


def add_cli_args(parser: argparse.ArgumentParser) -> None:
    """The loading options shared by the result scripts (``--results``, ``--no-check``, ...)."""
    parser.add_argument(
        "--results",
        nargs="+",
        required=True,
        type=Path,
        help="run folders or folders holding them, e.g. results/racer_main",
    )
    parser.add_argument(
        "--no-check",
        action="store_true",
        help="allow different models/dtypes/hardware (exploration only)",
    )
    parser.add_argument(
        "--include-incomplete", action="store_true", help="also use runs marked INCOMPLETE"
    )
    parser.add_argument(
        "--all-runs",
        action="store_true",
        help="keep reruns of a configuration (default: the newest only)",
    )


def load_cli(args: argparse.Namespace, newest: bool = True, check: bool = True) -> list[Run]:
    """The runs named by :func:`add_cli_args` options; a refused pairing exits with its reason.
    ``newest=False`` keeps reruns whatever ``--all-runs`` says (the caller picks);
    ``check=False`` leaves the comparability check to the caller (per table)."""
    try:
        runs = load_runs(args.results, check=check and not args.no_check,
                         include_incomplete=args.include_incomplete)  # fmt: skip
    except (IncompatibleRunsError, FileNotFoundError) as error:
        raise SystemExit(f"error: {error}") from None
    return runs if args.all_runs or not newest else latest_runs(runs)
