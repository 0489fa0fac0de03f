"""The vLLM table and figure from run folders: speed per batch size beside the native loop.

    python scripts/vllm_table.py --vllm results/curated/vllm_humaneval20/vllm/* \\
        --native results/curated/vllm_humaneval20/native/* \\
        --out docs/vllm_table.md --figure docs/figures/vllm_speedup.png

Cells read ``tok/s · speedup [95% CI] · MAT``; the speedup is over AR at the same batch size in
the same engine (vLLM without speculation for vLLM rows, our AR loop for native ones).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from racer_bench.analysis.batches import (
    acceptance_table,
    ar_agreement,
    load_runs,
    plot_speedups,
    speed_table,
)
from racer_bench.analysis.tables.render import script_header


def header(argv: Sequence[str] | None) -> str:
    """The generating command, so the drift test can regenerate the table from its records."""
    return script_header("vllm_table.py", list(sys.argv[1:] if argv is None else argv))


def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--vllm", nargs="+", type=Path, required=True, help="vLLM run folders")
    parser.add_argument("--native", nargs="*", type=Path, default=[], help="native run folders")
    parser.add_argument("--depth", type=int, default=5, help="positions in the acceptance table")
    parser.add_argument("--out", type=Path, default=None, help="write the Markdown here")
    parser.add_argument("--figure", type=Path, default=None, help="write the figure here")
    args = parser.parse_args(argv)
    rows = load_runs(sorted(p for p in args.vllm if p.is_dir()),
                     sorted(p for p in args.native if p.is_dir()))  # fmt: skip
    parts = [header(argv), speed_table(rows), acceptance_table(rows, args.depth)]
    if args.vllm and args.native:
        same, total = ar_agreement(sorted(args.vllm)[0], sorted(args.native)[0])
        parts.append(f"vLLM's AR at batch 1 equals our loop's AR on {same} of {total} prompts.")
    text = "\n\n".join(parts) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    if args.figure:
        plot_speedups(rows, args.figure)
    print(text)
    return text


if __name__ == "__main__":
    main()
