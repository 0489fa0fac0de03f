"""Build a REST datastore (token ids + suffix array, one .npz) from a corpus.

    python scripts/build_datastore.py --tokenizer smollm2_135m                # Python stdlib
    python scripts/build_datastore.py --tokenizer smollm2_135m --corpus data/sharegpt.jsonl

By default the file lands where ``method=rest`` looks for it
(``<cache_dir>/datastores/<tokenizer>/<corpus>-<max_tokens>.npz``), so a later run with the same
corpus, tokenizer and ``max_tokens`` loads it instead of building it; ``--out`` writes elsewhere
(then pass ``method.datastore=<file>``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from methods.datastore import (
    DATASTORE_FOLDER,
    build_datastore,
    config_vocab,
    corpus_cache_path,
    load_tokenizer,
    tokenizer_id,
    tokenizer_vocab,
)
from racer_bench.config.paths import cache_dir


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="stdlib", help="stdlib | a file or folder")
    parser.add_argument(
        "--tokenizer", required=True, help="byte | model config name | tokenizer folder | hub id"
    )
    parser.add_argument(
        "--cache-dir",
        default=cache_dir(),
        help="racer_bench cache (models/ and datastores/ live here)",
    )
    parser.add_argument("--max-tokens", type=int, default=4_000_000, help="size cap in tokens")
    parser.add_argument("--vocab-size", type=int, default=None, help="default: the model's")
    parser.add_argument("--out", default=None, help="output .npz (default: the cache path)")
    return parser.parse_args()


def target_vocab(spec: str, tokenizer: object, models_dir: Path) -> int:
    """The model's vocabulary size when ``spec`` names a model folder, else the tokenizer's."""
    for folder in (models_dir / spec, Path(spec).expanduser()):
        vocab = config_vocab(folder / "config.json")
        if vocab is not None:
            return vocab
    return tokenizer_vocab(tokenizer)


def main() -> None:
    args = parse_args()
    models_dir = Path(args.cache_dir).expanduser() / "models"
    start = time.perf_counter()
    tokenizer = load_tokenizer(args.tokenizer, args.vocab_size or 0, models_dir)
    vocab = args.vocab_size or target_vocab(args.tokenizer, tokenizer, models_dir)
    out = (
        Path(args.out)
        if args.out
        else corpus_cache_path(
            args.cache_dir, DATASTORE_FOLDER, args.corpus, args.tokenizer, vocab, args.max_tokens
        )
    )
    meta = {"tokenizer": tokenizer_id(args.tokenizer, vocab, models_dir)}
    store = build_datastore(args.corpus, tokenizer, vocab, args.max_tokens, meta)
    store.save(out)
    seconds = time.perf_counter() - start
    print(f"{out}: {len(store):,} tokens (vocab {vocab}) in {seconds:.1f} s")


if __name__ == "__main__":
    main()
