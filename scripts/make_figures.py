"""Figures from a results folder (PNG and PDF), drawn from the run records.

    python scripts/make_figures.py --results results/racer_main --out docs/figures

Each figure of ``racer_bench.analysis.plots`` is drawn when the runs hold data for it (speedup_mat,
categories, accept_hist, retrieval, accepted_ranks, capacity, asd_frontier, and for
``scheduler=confidence`` runs reliability and draft_size_cost). The newest run per method
variant and task is used; runs of different models, dtypes or hardware are refused.

Each drawn figure is entered in ``<out>/generated.json`` (figure name -> the ``--results``
folders it came from), so a test can redraw the committed figures from the committed records
and compare them (tests/unit/test_figures_drift.py).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from racer_bench.analysis import frames, plots


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    frames.add_cli_args(parser)
    parser.add_argument("--out", type=Path, default=Path("figures"), help="output folder")
    parser.add_argument("--formats", nargs="+", default=["png", "pdf"], help="file formats")
    parser.add_argument("--only", nargs="+", help="figure names to draw (default: all)")
    parser.add_argument("--dpi", type=int, default=110, help="PNG resolution")
    return parser.parse_args(argv)


INDEX = "generated.json"


def record_sources(index: Path, names: list[str], sources: list[str], dpi: int) -> None:
    """Enter each figure with the results folders it was drawn from (other entries kept)."""
    entries = json.loads(index.read_text()) if index.exists() else {}
    entries |= {name: {"results": sources, "dpi": dpi} for name in names}
    index.write_text(json.dumps(dict(sorted(entries.items())), indent=1) + "\n", "utf-8")


def main(argv: Sequence[str] | None = None) -> list[Path]:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    args = parse_args(argv)
    runs = frames.load_cli(args)
    figures = plots.all_figures(runs, args.only)
    if not figures:
        sys.exit("error: no figure can be drawn from these runs")
    written = []
    for name, fig in figures.items():
        written += plots.save_figure(fig, args.out, name, args.formats, args.dpi)
    record_sources(args.out / INDEX, list(figures), [str(p) for p in args.results], args.dpi)
    print(f"{len(runs)} runs -> {args.out}: {', '.join(figures)}")
    return written


if __name__ == "__main__":
    main()
