"""Paper tables from a results folder, as Markdown and LaTeX.

    python scripts/make_tables.py --results results/racer_main --out docs/tables.md

writes ``docs/tables.md`` and ``docs/tables.tex`` (without ``--out`` the Markdown is printed).
Which tables are built, from which runs and with which notes: :mod:`racer_bench.analysis.tables`.
Runs are loaded with ``racer_bench.analysis.frames`` (the newest run per method variant,
scheduler and task is kept); a table whose runs differ in model, dtype or hardware is refused
(each table apart: one document may hold tables made at different dtypes).
``--no-paper`` leaves out the papers' reported numbers.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from racer_bench.analysis import frames
from racer_bench.analysis.tables import Table, build_tables
from racer_bench.analysis.tables.render import generated_header, to_latex, to_markdown


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    frames.add_cli_args(parser)
    parser.add_argument("--out", type=Path, help="Markdown file; a .tex twin is written beside it")
    parser.add_argument("--no-paper", action="store_true", help="omit the papers' numbers")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> list[Table]:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    args = parse_args(argv)
    # table_runs keeps the newest within each table; each table's runs are checked apart
    runs = frames.load_cli(args, newest=False, check=False)
    try:
        tables = build_tables(runs, not args.no_paper, not args.all_runs, not args.no_check)
    except frames.IncompatibleRunsError as error:
        sys.exit(f"error: {error}")
    if not tables:
        sys.exit(f"error: no table can be built from {', '.join(map(str, args.results))}")
    sources = " ".join(str(p) for p in args.results)
    markdown = f"{generated_header(sources)}\n\n"
    markdown += "\n".join(to_markdown(t) for t in tables)
    if args.out is None:
        print(markdown)
        return tables
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(markdown, encoding="utf-8")
    args.out.with_suffix(".tex").write_text("\n".join(to_latex(t) for t in tables), "utf-8")
    print(f"wrote {args.out} and {args.out.with_suffix('.tex')}: {[t.key for t in tables]}")
    return tables


if __name__ == "__main__":
    main()
