"""Replay recorded greedy outputs through drafters, without the model: MAT per prompt and task.

How a step is replayed (prefill token, pruning to the room left, accepted path plus bonus
token): :mod:`racer_bench.replay.core`; recorded runs: :mod:`racer_bench.replay.runs`.

Drafters (``--drafters``, comma-separated; the first is compared with the others):

* ``suffix``: :class:`methods.suffix.SuffixDrafter`; ``suffix-arctic``: ArcticInference's
  ``SuffixDecodingCache`` (pip package ``arctic-inference``, not a dependency of this project)
  driven the same way: one request per turn, prompt in the local tree, responses in the global
  tree in prompt order, same depth, spec-token cap, factor, offset and minimum probability;
* ``sam``: :class:`methods.sam.SamDrafter` (dynamic automaton only); ``sam-brute``: an
  independent brute-force longest earlier match (the longest suffix of the context that occurs
  earlier, its earliest occurrence's continuation, ``int(alpha * match)`` tokens, capped);
  ``sam-reference``: the ``DynSAM`` class of SAM-Decoding's SAM-only package, loaded at run
  time from the file given by ``--sam-reference`` (never part of this repository);
* ``pld``: :class:`methods.pld.PLDDrafter` with ``--pld MIN,MAX,K`` (n-gram bounds, chain
  length): replayed over a vLLM run's batch-1 AR outputs (``--batch-size 1``) with vLLM's
  ``ngram`` settings it cross-checks the two implementations on the same outputs;
* ``recorded``: the run's own method from its manifest; its replayed steps must equal the
  recorded ones (a check of the replay itself: prompts re-rendered, steps, pruning).

Records come from run folders (``prompts.jsonl`` + ``manifest.json``); prompt ids are rebuilt
with the run's task and tokenizer from the baseline (autoregressive) outputs, so the data
directory (``$RACER_BENCH_DATA`` or ``--data-dir``) and the cached model folder must exist::

    PYTHONPATH=. python scripts/simulate_drafts.py results/curated/racer_main/pld_humaneval \\
        results/curated/racer_main/pld_spec_bench --drafters suffix,suffix-arctic

``--agreement`` also asks every drafter for a draft at every output position (each drafter's
state depends only on the tokens seen, not on where steps ended) and counts the positions where
the drafts equal the first drafter's, and where their accepted lengths differ.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from methods.common.datastore import config_vocab, load_tokenizer
from racer_bench.replay.core import Native, Replayable
from racer_bench.replay.drafters import Options, SuffixSettings
from racer_bench.replay.runs import ReplayRun, ReplayTally, load_run, print_table, simulate


def suffix_drafter(opts: Options, run: ReplayRun) -> Replayable:
    """``suffix``: :class:`methods.suffix.SuffixDrafter` with the suffix settings."""
    from methods.suffix import SuffixDrafter

    s = opts.suffix
    return Native(SuffixDrafter(run.vocab_size, s.max_spec_tokens, s.max_tree_depth,
                                s.max_spec_factor, s.max_spec_offset, s.min_token_prob,
                                s.max_cached_requests, s.use_tree_spec))  # fmt: skip


def sam_drafter(opts: Options, run: ReplayRun) -> Replayable:
    """``sam``: :class:`methods.sam.SamDrafter` (dynamic automaton only)."""
    from methods.sam import SamDrafter

    return Native(SamDrafter(run.vocab_size, opts.sam_capacity, opts.sam_alpha))


def pld_drafter(opts: Options, run: ReplayRun) -> Replayable:
    """``pld``: :class:`methods.pld.PLDDrafter` with ``--pld MIN,MAX,K``."""
    from methods.pld import PLDDrafter

    low, high, k = opts.pld
    return Native(PLDDrafter(run.vocab_size, high, k, min_ngram_size=low))


PROJECT_DRAFTERS = {"suffix": suffix_drafter, "sam": sam_drafter, "pld": pld_drafter}


def open_model(folder: Path) -> tuple[Any, int]:
    """The tokenizer of a cached model folder and its vocabulary size."""
    tokenizer = load_tokenizer(folder.name, 0, folder.parent)
    return tokenizer, config_vocab(folder / "config.json") or len(tokenizer)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path, help="run folders (prompts.jsonl, manifest)")
    p.add_argument("--drafters", default="suffix,suffix-arctic", help="comma-separated")
    p.add_argument("--data-dir", default=None, help="default: $RACER_BENCH_DATA")
    p.add_argument("--warmup", type=int, default=None, help="default: the run's warmup_prompts")
    p.add_argument("--per-prompt", action="store_true", help="print each turn's MAT")
    p.add_argument("--agreement", action="store_true", help="compare drafts at every position")
    p.add_argument("--max-spec-tokens", type=int, default=64)
    p.add_argument("--max-tree-depth", type=int, default=64)
    p.add_argument("--max-spec-factor", type=float, default=1.0)
    p.add_argument("--max-spec-offset", type=float, default=0.0)
    p.add_argument("--min-token-prob", type=float, default=0.1)
    p.add_argument("--max-cached-requests", type=int, default=100000)
    p.add_argument("--chain", action="store_true", help="suffix: use_tree_spec=false")
    p.add_argument("--sam-capacity", type=int, default=39)
    p.add_argument("--sam-alpha", type=float, default=4.0)
    p.add_argument(
        "--sam-reference", default=None, help="SAM-Decoding's samd_sam_only/sam/dyn_sam.py"
    )
    p.add_argument("--pld", default="1,3,10", help="pld: min n-gram, max n-gram, chain length")
    p.add_argument("--batch-size", type=int, default=1, help="vLLM runs: records of this size")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, dict[str, ReplayTally]]:
    args = parse_args(argv)
    names = [n.strip() for n in args.drafters.split(",") if n.strip()]
    suffix = SuffixSettings(args.max_spec_tokens, args.max_tree_depth, args.max_spec_factor,
                            args.max_spec_offset, args.min_token_prob, args.max_cached_requests,
                            not args.chain)  # fmt: skip
    low, high, k = (int(v) for v in args.pld.split(","))
    opts = Options(suffix, args.sam_capacity, args.sam_alpha, args.sam_reference, (low, high, k))
    runs = [load_run(folder, args.data_dir, open_model, args.batch_size) for folder in args.runs]
    results = simulate(runs, names, opts, PROJECT_DRAFTERS, args.warmup,
                       print if args.per_prompt else None, args.agreement)  # fmt: skip
    if not args.agreement:
        print_table(results, names)
    return results


if __name__ == "__main__":
    main()
