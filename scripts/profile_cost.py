"""Measure the target's cost profile cost(N) and cache it for ``scheduler.profile=auto``.

    python scripts/profile_cost.py model=smollm2_135m num_threads=2 --max-size 64 --reps 7

Positional arguments are the run's Hydra overrides (model, num_threads, engine, ...), so the
profile is cached under the same key a run uses: model, dtype, device, thread count, torch
version and engine, in ``<paths.cache_dir>/cost_profiles/``. Forwards are tree-shaped, after a
170-token prefix, every size once per repetition (interleaved), medians relative to a 1-token
forward, made monotone. Run it on a quiet machine: the scheduler trusts these numbers.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from racer_bench.config.paths import CONF_DIR
from racer_bench.engine.schedule import cost
from racer_bench.run import resolvers


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. model=smollm2_135m")
    parser.add_argument("--max-size", type=int, default=64, help="largest forward (tokens)")
    parser.add_argument("--reps", type=int, default=7, help="timed repetitions per size")
    parser.add_argument(
        "--prefix", type=int, default=cost.DEFAULT_CONTEXT, help="cached context length (tokens)"
    )
    parser.add_argument("--out", type=Path, help="also write the profile here")
    return parser.parse_args(argv)


def table(profile: cost.CostProfile) -> str:
    """Markdown: size, median ms, raw cost, monotone cost."""
    seconds = profile.meta.get("median_seconds") or [float("nan")] * len(profile.sizes)
    raw = profile.meta.get("raw_costs") or profile.costs
    lines = ["| tokens in forward | median ms | cost | monotone cost |", "|---:|---:|---:|---:|"]
    for n, s, r, c in zip(profile.sizes, seconds, raw, profile.costs, strict=True):
        lines.append(f"| {n} | {s * 1e3:.1f} | {r:.2f} | {c:.2f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> cost.CostProfile:
    args = parse_args(argv)
    resolvers.register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(args.overrides))
    if cfg.num_threads:
        torch.set_num_threads(int(cfg.num_threads))
    target = instantiate(cfg.model)
    target.set_engine(cfg.get("engine", "auto"))
    profile = cost.measure_target(target, args.max_size, args.reps, args.prefix)
    key = profile.meta["key"]
    path = profile.save(cost.cache_path(cfg.paths.cache_dir, key))
    if args.out:
        profile.save(args.out)
    print(f"{key}\n\n{table(profile)}\n\ncached: {path}")
    return profile


if __name__ == "__main__":
    main()
