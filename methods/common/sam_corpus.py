"""The static corpus automaton of SAM-Decoding: tokenize a corpus, build, freeze, save.

The corpus is read as REST's datastore reads it (:mod:`methods.common.datastore`: ``stdlib``, a
text,
code or JSON(L) file, or a folder); documents are separated by an id that no query contains
(never drafted). The automaton is built in pure Python (about two states per token), so the
size cap ``max_tokens`` is kept well below REST's. Its cache file:
``corpus_cache_path(cache_dir, AUTOMATON_FOLDER, ...)`` (:mod:`methods.common.datastore`).
"""

from __future__ import annotations

from typing import Any

from methods.common.datastore import (
    corpus_files,
    encode_corpus,
    iter_documents,
    separator_for,
)
from methods.common.suffix_automaton import FrozenAutomaton, SuffixAutomaton

AUTOMATON_FOLDER = "sam"  # under the cache folder: <tokenizer>/<corpus>-<max_tokens>.npz


def build_corpus_automaton(
    corpus: str, tokenizer: Any, vocab_size: int, max_tokens: int, meta: dict[str, Any]
) -> FrozenAutomaton:
    """Frozen suffix automaton of a corpus's token ids (documents end with the separator)."""
    docs = iter_documents(corpus_files(corpus))
    tokens = encode_corpus(docs, tokenizer, vocab_size, max_tokens)
    sam = SuffixAutomaton()
    sam.extend(tokens.tolist())
    info = {**meta, "corpus": corpus, "vocab_size": vocab_size, "n_tokens": len(tokens),
            "separator": separator_for(vocab_size)}  # fmt: skip
    return sam.freeze(info)
