"""Build SAM-Decoding's static corpus automaton (one .npz) from a corpus.

    python scripts/build_sam_corpus.py --tokenizer smollm2_135m --corpus data/sharegpt.jsonl
    python -m racer_bench method=sam method.corpus_automaton=<the printed .npz> ...

The corpus is read like REST's (``stdlib``, a text/code/JSON(L) file or a folder); the file
lands under ``<cache_dir>/sam/<tokenizer>/<corpus>-<max_tokens>.npz`` unless ``--out`` is given.
The automaton is built in pure Python: keep ``--max-tokens`` modest (memory grows by a few
hundred bytes per token while building).
"""

from __future__ import annotations

import time
from pathlib import Path

from methods.common.datastore import corpus_build, corpus_parser
from methods.common.sam_corpus import AUTOMATON_FOLDER, build_corpus_automaton


def main(argv: list[str] | None = None) -> Path:
    parser = corpus_parser((__doc__ or "").splitlines()[0], AUTOMATON_FOLDER, 500_000)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    job = corpus_build(args, AUTOMATON_FOLDER)
    sam = build_corpus_automaton(args.corpus, job.tokenizer, job.vocab, args.max_tokens, job.meta)
    sam.save(job.out)
    seconds = time.perf_counter() - start
    print(f"{job.out}: {sam.meta['n_tokens']:,} tokens, {len(sam):,} states in {seconds:.1f} s")
    return job.out


if __name__ == "__main__":
    main()
