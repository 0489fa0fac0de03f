"""The static corpus automaton of SAM-Decoding: tokenize a corpus, build, freeze, save.

The corpus is read as REST's datastore reads it (:mod:`methods.datastore`: ``stdlib``, a text,
code or JSON(L) file, or a folder); documents are separated by an id that no query contains
(never drafted). The automaton is built in pure Python (about two states per token), so the
size cap ``max_tokens`` is kept well below REST's. Its cache file:
``corpus_cache_path(cache_dir, AUTOMATON_FOLDER, ...)`` (:mod:`methods.datastore`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from methods.datastore import (
    config_vocab,
    corpus_files,
    encode_corpus,
    iter_documents,
    separator_for,
    tokenizer_vocab,
)
from methods.suffix_automaton import FrozenAutomaton, SuffixAutomaton

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


def target_vocab(spec: str, tokenizer: Any, models_dir: Path) -> int:
    """The model's vocabulary size when ``spec`` names a model folder, else the tokenizer's."""
    for folder in (models_dir / spec, Path(spec).expanduser()):
        vocab = config_vocab(folder / "config.json")
        if vocab is not None:
            return vocab
    return tokenizer_vocab(tokenizer)
