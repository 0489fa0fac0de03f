"""The serving tables and figure from ``backend=vllm_serve`` run folders.

    python scripts/vllm_serve_table.py --runs results/curated/vllm_serve_humaneval32/* \\
        --out docs/vllm_serve_table.md --figure docs/figures/vllm_serve.png

Throughput cells read ``tok/s (x own AR)``: each run measured its method and vLLM's AR on the
same prompts at each concurrency, the order alternating per concurrency.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from racer_bench.analysis.serve_tables import load_serve_runs, plot_serving, serve_tables
from racer_bench.analysis.tables.render import script_header


def header(argv: Sequence[str] | None) -> str:
    """The generating command, so the drift test can regenerate the table from its records."""
    return script_header("vllm_serve_table.py", list(sys.argv[1:] if argv is None else argv))


def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", nargs="+", type=Path, required=True, help="serving run folders")
    parser.add_argument("--out", type=Path, default=None, help="write the Markdown here")
    parser.add_argument("--figure", type=Path, default=None, help="write the figure here")
    args = parser.parse_args(argv)
    runs = load_serve_runs([p for p in args.runs if p.is_dir()])
    text = header(argv) + "\n\n" + serve_tables(runs) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    if args.figure:
        plot_serving(runs, args.figure)
    print(text)
    return text


if __name__ == "__main__":
    main()
