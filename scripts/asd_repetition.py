"""Output length, EOS stops and repeated 4-grams of lossy runs beside their strict outputs.

    python scripts/asd_repetition.py results/curated/asd_grid_humaneval/*/*

A positive log-likelihood gap (ASD text *more* likely under the target than strict greedy's)
can mean the lossy verifier pushed the output into a loop, which a small model finds very
likely. Per run folder this prints, over its finished prompts, the mean output length, how
many outputs stopped before ``max_new_tokens`` and the mean share of 4-grams that repeat an
earlier one (:func:`racer_bench.analysis.quality.repeated_ngram_share`), strict vs lossy.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from pathlib import Path

from racer_bench.analysis import records
from racer_bench.analysis.quality import output_tokens, repeated_ngram_share
from racer_bench.run.paired import STRICT

HEADER = (
    "| run | prompts | length strict → lossy | stopped early strict → lossy "
    "| repeated 4-grams strict → lossy |\n|---|---:|---:|---:|---:|"
)


def stopped_early(record: dict, mode: str) -> bool:
    """Whether the last turn of ``mode`` ended before the token limit."""
    return record[mode]["turns"][-1].get("stop_reason") != "length"


def row(run_dir: Path) -> str:
    """One Markdown row for a paired lossy run."""
    done = [r for r in records.load_prompts(run_dir) if r.get("status") == "ok" and STRICT in r]
    if not done:
        return f"| {run_dir} | 0 | – | – | – |"

    def mean(fn, mode: str) -> float:
        return statistics.mean(fn(output_tokens(r, mode)) for r in done)

    stops = [sum(stopped_early(r, m) for r in done) for m in (STRICT, "method")]
    return (
        f"| {run_dir} | {len(done)} | {mean(len, STRICT):.0f} → {mean(len, 'method'):.0f} "
        f"| {stops[0]} → {stops[1]} | {mean(repeated_ngram_share, STRICT):.2f} → "
        f"{mean(repeated_ngram_share, 'method'):.2f} |"
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
