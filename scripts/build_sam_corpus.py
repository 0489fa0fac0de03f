"""Build SAM-Decoding's static corpus automaton (one .npz) from a corpus.

    python scripts/build_sam_corpus.py --tokenizer smollm2_135m --corpus data/sharegpt.jsonl
    python -m racer_bench method=sam method.corpus_automaton=<the printed .npz> ...

The corpus is read like REST's (``stdlib``, a text/code/JSON(L) file or a folder); the file
lands under ``<cache_dir>/sam/<tokenizer>/<corpus>-<max_tokens>.npz`` unless ``--out`` is given.
The automaton is built in pure Python: keep ``--max-tokens`` modest (memory grows by a few
hundred bytes per token while building).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from methods.datastore import corpus_cache_path, load_tokenizer, tokenizer_id
from methods.sam_corpus import AUTOMATON_FOLDER, build_corpus_automaton, target_vocab
from racer_bench.config.paths import cache_dir


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="stdlib", help="stdlib | a file or folder")
    parser.add_argument(
        "--tokenizer", required=True, help="byte | model config name | tokenizer folder | hub id"
    )
    parser.add_argument(
        "--cache-dir",
        default=cache_dir(),
        help="racer_bench cache (models/ and sam/ live here)",
    )
    parser.add_argument("--max-tokens", type=int, default=500_000, help="size cap in tokens")
    parser.add_argument("--vocab-size", type=int, default=None, help="default: the model's")
    parser.add_argument("--out", default=None, help="output .npz (default: the cache path)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> Path:
    args = parse_args(argv)
    models_dir = Path(args.cache_dir).expanduser() / "models"
    start = time.perf_counter()
    tokenizer = load_tokenizer(args.tokenizer, args.vocab_size or 0, models_dir)
    vocab = args.vocab_size or target_vocab(args.tokenizer, tokenizer, models_dir)
    out = Path(args.out) if args.out else corpus_cache_path(
        args.cache_dir, AUTOMATON_FOLDER, args.corpus, args.tokenizer, vocab, args.max_tokens
    )  # fmt: skip
    meta = {"tokenizer": tokenizer_id(args.tokenizer, vocab, models_dir)}
    sam = build_corpus_automaton(args.corpus, tokenizer, vocab, args.max_tokens, meta)
    sam.save(out)
    seconds = time.perf_counter() - start
    print(f"{out}: {sam.meta['n_tokens']:,} tokens, {len(sam):,} states in {seconds:.1f} s")
    return out


if __name__ == "__main__":
    main()
