"""Output length, EOS stops and repeated 4-grams of lossy runs beside their strict outputs.

    python scripts/asd_repetition.py results/curated/asd_grid_humaneval/*/*

A positive log-likelihood gap (ASD text *more* likely under the target than strict greedy's)
can mean the lossy verifier pushed the output into a loop, which a small model finds very
likely. Per run folder this prints, over its finished prompts, the mean output length, how
many outputs stopped before ``max_new_tokens`` and the mean share of 4-grams that repeat an
earlier one (:func:`racer_bench.analysis.quality.output_stats`), strict vs lossy; docs quote
them with ``output_stat`` figure markers.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from racer_bench.analysis.quality import output_stats
from racer_bench.record import folder as records
from racer_bench.run.paired import STRICT

HEADER = (
    "| run | prompts | length strict → lossy | stopped early strict → lossy "
    "| repeated 4-grams strict → lossy |\n|---|---:|---:|---:|---:|"
)


def row(run_dir: Path) -> str:
    """One Markdown row for a paired lossy run."""
    prompts = records.load_prompts(run_dir)
    strict, lossy = output_stats(prompts, STRICT), output_stats(prompts, "method")
    n = sum(1 for r in prompts if r.get("status") == "ok" and STRICT in r)
    if not n:
        return f"| {run_dir} | 0 | – | – | – |"
    return (
        f"| {run_dir} | {n} | {strict['length']:.0f} → {lossy['length']:.0f} "
        f"| {strict['stopped']} → {lossy['stopped']} | {strict['repeat4']:.2f} → "
        f"{lossy['repeat4']:.2f} |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="paired lossy run folders")
    args = parser.parse_args(argv)
    print(HEADER)
    for run_dir in args.runs:
        print(row(run_dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
