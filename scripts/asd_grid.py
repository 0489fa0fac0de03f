"""An ASD (B, g, M) grid against strict greedy, one process, strict decoded once per prompt.

    python scripts/asd_grid.py method=pld task=gsm8k task.limit=30 \
        --out results/asd_grid/pld --points 4:0.5:1 12:1:2

Positional arguments (before the options) are ordinary run overrides (``method=racer
task=gsm8k model=...``); each ``--points`` entry is ``budget:gate:cap``. Writes one run folder
per point under ``--out`` and prints the sweep table (throughput and decode-throughput gain vs
strict, divergence, accuracy delta, answer agreement, target log-likelihood gap and first
divergence, with paired bootstrap CIs; docs/asd.md). ``python -m racer_bench
sweep=asd_grid`` is the Hydra-multirun equivalent for a cluster (every job then pairs with its
own strict run).

The grid runs at the CLI's defaults (``scheduler=auto`` ...); the model drafters' GSM8K records
(``results/archive/asd_grid_gsm8k_drafters``) were made with ``scheduler=fixed``.
"""

from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path

from racer_bench.errors import ConfigError
from racer_bench.run.grid import run_grid

# the sibling script's main, loaded by path (scripts/ is not a package)
collect_sweep = runpy.run_path(str(Path(__file__).with_name("collect_sweep.py")))


def parse_point(text: str) -> list[str]:
    """``"4:0.5:1"`` -> verifier overrides for B=4, g=0.5, M=1."""
    parts = text.split(":")
    if len(parts) != 3:
        raise ConfigError(f"--points {text}: expected budget:gate:cap, e.g. 4:0.5:1")
    budget, gate, cap = parts
    return ["verifier=asd", f"verifier.budget={budget}", f"verifier.gate={gate}",
            f"verifier.cap={cap}"]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("overrides", nargs="*", help="run overrides, e.g. method=racer task=gsm8k")
    parser.add_argument("--points", nargs="+", required=True, help="budget:gate:cap entries")
    parser.add_argument("--out", type=Path, required=True, help="folder for the run folders")
    args = parser.parse_args()
    try:
        points = [parse_point(p) for p in args.points]
        run_grid(args.overrides, points, args.out)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    collect_sweep["main"](["--results", str(args.out)])


if __name__ == "__main__":
    main()
