"""Build a REST datastore (token ids + suffix array, one .npz) from a corpus.

    python scripts/build_datastore.py --tokenizer smollm2_135m                # Python stdlib
    python scripts/build_datastore.py --tokenizer smollm2_135m --corpus data/sharegpt.jsonl

By default the file lands where ``method=rest`` looks for it
(``<cache_dir>/datastores/<tokenizer>/<corpus>-<max_tokens>.npz``), so a later run with the same
corpus, tokenizer and ``max_tokens`` loads it instead of building it; ``--out`` writes elsewhere
(then pass ``method.datastore=<file>``).
"""

from __future__ import annotations

import time

from methods.common.datastore import DATASTORE_FOLDER, build_datastore, corpus_build, corpus_parser


def main() -> None:
    args = corpus_parser(__doc__.splitlines()[0], DATASTORE_FOLDER, 4_000_000).parse_args()
    start = time.perf_counter()
    job = corpus_build(args, DATASTORE_FOLDER)
    store = build_datastore(args.corpus, job.tokenizer, job.vocab, args.max_tokens, job.meta)
    store.save(job.out)
    seconds = time.perf_counter() - start
    print(f"{job.out}: {len(store):,} tokens (vocab {job.vocab}) in {seconds:.1f} s")


if __name__ == "__main__":
    main()
