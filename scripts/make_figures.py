"""Figures from a results folder (PNG and PDF), drawn from the run records.

    python scripts/make_figures.py --results results/racer_main --out docs/figures

Each figure of ``racer_bench.analysis.plots`` is drawn when the runs hold data for it (speedup_mat,
categories, accept_hist, retrieval, accepted_ranks, capacity, asd_frontier, and for
``scheduler=confidence`` runs reliability and draft_size_cost). The newest run per method
variant and task is used; runs of different models, dtypes or hardware are refused.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from racer_bench.analysis import frames as F
from racer_bench.analysis import plots as P


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    F.add_cli_args(parser)
    parser.add_argument("--out", type=Path, default=Path("figures"), help="output folder")
    parser.add_argument("--formats", nargs="+", default=["png", "pdf"], help="file formats")
    parser.add_argument("--only", nargs="+", help="figure names to draw (default: all)")
    parser.add_argument("--dpi", type=int, default=110, help="PNG resolution")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> list[Path]:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    args = parse_args(argv)
    runs = F.load_cli(args)
    figures = P.all_figures(runs, args.only)
    if not figures:
        sys.exit("error: no figure can be drawn from these runs")
    written = []
    for name, fig in figures.items():
        written += P.save_figure(fig, args.out, name, args.formats, args.dpi)
    print(f"{len(runs)} runs -> {args.out}: {', '.join(figures)}")
    return written


if __name__ == "__main__":
    main()
