"""One table from a sweep (Hydra multirun) folder: a row per job, its overrides and metrics.

    python scripts/collect_sweep.py --results results/asd/multirun_2026-01-01_12-00-00
    python scripts/collect_sweep.py --results results/capacity --out capacity.csv --sort speedup

Prints Markdown (or writes ``--out``: ``.md`` Markdown, ``.csv`` every runs-frame column). The
overrides column keeps only the overrides that differ between jobs.
"""

from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from racer_bench.analysis import frames
from racer_bench.analysis.tables.cells import num
from racer_bench.analysis.tables.context import mixing_note, setting_text
from racer_bench.analysis.tables.render import Table, to_markdown

COLUMNS = (  # (runs-frame column, header, format)
    ("speedup", "speedup", "{:.2f}×"),
    ("mat", "MAT", "{:.2f}"),
    ("tokens_per_s", "tok/s", "{:.2f}"),
    ("baseline_tokens_per_s", "AR tok/s", "{:.2f}"),
    ("draft_size_mean", "draft size", "{:.1f}"),
    ("retrieval_hit_rate", "retrieval hit", "{:.0%}"),
    ("identical", "identical", "{:.0%}"),
    ("score", "score", "{:.3f}"),
    ("strict_mat", "strict MAT", "{:.2f}"),
    ("gain_vs_strict", "gain vs strict", "{:+.1%}"),
    ("decode_gain_vs_strict", "decode gain", "{:+.1%}"),
    ("exceptions_per_prompt", "exceptions/prompt", "{:.1f}"),
    ("strict_score", "strict score", "{:.3f}"),
    ("accuracy_delta", "accuracy Δ", "{:+.3f}"),
    ("accuracy_delta_ci_low", "Δ CI low", "{:+.3f}"),
    ("accuracy_delta_ci_high", "Δ CI high", "{:+.3f}"),
    ("divergence", "divergence", "{:.0%}"),
    ("agreement", "answer agreement", "{:.0%}"),
    ("agreement_ci_low", "agr. CI low", "{:.0%}"),
    ("agreement_ci_high", "agr. CI high", "{:.0%}"),
    ("logprob_gap", "log-lik gap", "{:+.3f}"),
    ("logprob_gap_ci_low", "gap CI low", "{:+.3f}"),
    ("logprob_gap_ci_high", "gap CI high", "{:+.3f}"),
    ("first_divergence", "first divergence", "{:.0%}"),
)


def varying_overrides(df: pd.DataFrame) -> list[str]:
    """Per run, the overrides that are not shared by every run of the sweep."""
    lists = [str(o).split() for o in df["overrides"]]
    shared = set.intersection(*map(set, lists)) if lists else set()
    return [" ".join(o for o in items if o not in shared) or "(defaults)" for items in lists]


def job_key(run_id: str) -> tuple:
    """Sort multirun job folders numerically (``2`` before ``10``)."""
    return tuple(int(p) if p.isdigit() else math.inf for p in run_id.split("/")), run_id


def sweep_table(df: pd.DataFrame, sort: str | None = None) -> Table:
    """The sweep as a table (columns with no value in any job are left out)."""
    df = df.assign(varying=varying_overrides(df))
    if sort:
        df = df.sort_values(sort, ascending=False, na_position="last")
    else:
        df = df.iloc[sorted(range(len(df)), key=lambda i: job_key(df["run_id"].iloc[i]))]
    cols = [c for c in COLUMNS if c[0] in df and df[c[0]].notna().any()]
    header = ["job", "overrides", "method", "task", "prompts", *[h for _, h, _ in cols]]
    rows = [
        [row["run_id"], row["varying"], row["label"], row["task"], str(row["n_prompts"]),
         *[num(row[c], f) for c, _, f in cols]]
        for _, row in df.iterrows()
    ]  # fmt: skip
    notes = [f"{len(df)} runs; model {df['model'].iloc[0]} ({df['dtype'].iloc[0]}) on "
             f"{df['device'].iloc[0]} [{setting_text(df)}]."]  # fmt: skip
    mixed = mixing_note(df, lambda row: f"job {row['run_id']}")
    notes += [mixed] if mixed else []
    return Table("sweep", "Sweep", header, rows, notes)


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    frames.add_cli_args(parser)
    parser.add_argument("--out", type=Path, help=".md or .csv file (default: print Markdown)")
    parser.add_argument("--sort", help="runs-frame column to sort by, descending (default: job)")
    args = parser.parse_args(argv)
    args.all_runs = True  # every job of a sweep is its own configuration
    df = frames.runs_frame(frames.load_cli(args))
    if args.out is not None and args.out.suffix == ".csv":
        df.to_csv(args.out, index=False)
        print(f"wrote {args.out} ({len(df)} runs)")
        return df
    markdown = to_markdown(sweep_table(df, args.sort))
    if args.out is None:
        print(markdown)
    else:
        args.out.write_text(markdown, encoding="utf-8")
        print(f"wrote {args.out} ({len(df)} runs)")
    return df


if __name__ == "__main__":
    main()
