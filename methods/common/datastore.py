"""REST datastore: a token corpus with a suffix array, longest-suffix lookup and prefix counts.

Follows REST's DraftRetriever (FasterDecoding/REST, ``DraftRetriever/src/lib.rs``): the corpus is
one token buffer sorted into a suffix array; a query finds the range of suffixes that start with
it by binary search; the next ``long`` tokens after up to ``k`` matches are the retrieved
continuations, and every prefix of every continuation is counted.

Deviations, both deliberate:

* documents are separated by a separator id that no query can contain (the largest value of
  the storage dtype) and continuations stop at it; the reference concatenates entries with no
  separator, so a draft may run into the next, unrelated entry;
* the suffix array comes from ``pydivsufsort`` (libdivsufsort) instead of libsais; tokens are
  stored as uint16 when the vocabulary allows it, else uint32 (the reference needs a patch for
  vocabularies above 65535).

A datastore file is one ``.npz`` with ``tokens``, ``sa`` (suffix array) and ``meta`` (JSON).
:func:`load_or_build` caches it under ``<cache_dir>/datastores/<tokenizer>/<corpus>-<n>.npz``.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import sys
import sysconfig
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydivsufsort import divsufsort

from racer_bench.config.paths import cache_dir
from racer_bench.models.tiny_tokenizer import ByteTokenizer

DATASTORE_FOLDER = "datastores"  # under the cache folder: <tokenizer>/<corpus>-<n>.npz
TEXT_SUFFIXES = (".py", ".txt", ".md", ".rst", ".jsonl", ".json")
SKIP_DIRS = frozenset(
    {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"}
)
BYTE_VOCAB = ByteTokenizer.vocab_size


def separator_for(vocab_size: int) -> int:
    """Separator id: the largest value of the smallest unsigned dtype that holds the vocab."""
    return int(np.iinfo(token_dtype(vocab_size)).max)


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 while every token id (and the separator) fits, else uint32."""
    return np.dtype(np.uint16 if vocab_size < np.iinfo(np.uint16).max else np.uint32)


@dataclass
class Datastore:
    """Token buffer + suffix array with REST-style retrieval.

    Attributes:
        tokens: uint16/uint32 array[T] of token ids, documents separated by ``separator``.
        sa: int array[T], the suffix array of ``tokens`` (lexicographic order of suffixes).
        separator: the id that ends every document; never matched, never drafted.
        meta: provenance (tokenizer, corpus, vocab size, ...), saved with the arrays.
    """

    tokens: np.ndarray
    sa: np.ndarray
    separator: int
    meta: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def from_tokens(tokens: np.ndarray, separator: int, meta: dict[str, Any] | None = None):
        """Build the suffix array of ``tokens`` (an unsigned integer array[T])."""
        if not np.issubdtype(tokens.dtype, np.unsignedinteger):
            raise TypeError(f"datastore tokens must be unsigned, got {tokens.dtype}")
        sa = divsufsort(tokens) if len(tokens) else np.zeros(0, dtype=np.int32)
        return Datastore(tokens, np.asarray(sa), separator, dict(meta or {}))

    def __len__(self) -> int:
        return len(self.tokens)

    def save(self, path: str | Path) -> Path:
        """Write one ``.npz`` atomically (a half-written file is never picked up)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npz")
        meta = json.dumps({**self.meta, "separator": self.separator})
        np.savez(tmp, tokens=self.tokens, sa=self.sa, meta=np.array(meta))
        tmp.replace(path)
        return path

    @staticmethod
    def load(path: str | Path) -> Datastore:
        with np.load(Path(path).expanduser()) as data:
            meta = json.loads(str(data["meta"]))
            return Datastore(data["tokens"], data["sa"], int(meta.pop("separator")), meta)

    def match_range(self, query: list[int]) -> tuple[int, int]:
        """Suffix-array range ``[lo, hi)`` of the suffixes that start with ``query``."""
        lo, hi = 0, len(self.sa)
        for offset, token in enumerate(query):
            lo = self._bound(lo, hi, offset, token, upper=False)
            hi = self._bound(lo, hi, offset, token, upper=True)
            if lo >= hi:
                break
        return lo, hi

    def _bound(self, lo: int, hi: int, offset: int, token: int, upper: bool) -> int:
        """First index in ``[lo, hi)`` whose token at ``offset`` is >= (> if upper) ``token``.

        Inside ``[lo, hi)`` all suffixes share the query's first ``offset`` tokens, so they are
        sorted by the token at ``offset``; a suffix too short to have one sorts first (-1).
        """
        tokens, sa, n = self.tokens, self.sa, len(self.tokens)
        while lo < hi:
            mid = (lo + hi) // 2
            pos = int(sa[mid]) + offset
            t = int(tokens[pos]) if pos < n else -1
            if t < token or (upper and t == token):
                lo = mid + 1
            else:
                hi = mid
        return lo

    def longest_match(
        self, context: list[int], max_span: int, min_span: int
    ) -> tuple[int, int, int]:
        """Longest suffix of ``context`` (lengths ``max_span`` down to ``min_span``) found.

        Same answer as REST's scan from the longest length down, by bisection: when a suffix
        occurs, every shorter suffix occurs too.

        Returns:
            (span, lo, hi): the suffix length and its suffix-array range; span 0 when none hit.
        """
        best = (0, 0, 0)
        short, long = min_span, min(max_span, len(context))
        while short <= long:
            span = (short + long) // 2
            lo, hi = self.match_range(context[len(context) - span :])
            if hi > lo:
                best, short = (span, lo, hi), span + 1
            else:
                long = span - 1
        return best

    def continuations(self, lo: int, hi: int, span: int, k: int, long: int) -> np.ndarray:
        """Next ``long`` tokens after the first ``k`` matches of the range (REST's order).

        Returns:
            int64 array[m, long], m = min(k, hi - lo); -1 from the end of the corpus or the first
            separator onwards.
        """
        starts = self.sa[lo : min(hi, lo + k)].astype(np.int64) + span
        idx = starts[:, None] + np.arange(long)[None, :]
        inside = idx < len(self.tokens)
        conts = self.tokens[np.minimum(idx, len(self.tokens) - 1)].astype(np.int64)
        cut = np.logical_or.accumulate(~inside | (conts == self.separator), axis=1)
        conts[cut] = -1
        return conts


def top_prefixes(conts: np.ndarray, num: int) -> list[list[int]]:
    """The ``num`` most frequent prefixes of the continuations (REST's trie counts).

    Ties go to the shorter prefix, then to the lexicographically smaller one, so the result is
    prefix-closed (a prefix is never rarer than its extensions) and listed parents-first.

    Args:
        conts: int array[m, L] of continuations, -1-padded (see :meth:`Datastore.continuations`).
        num: how many prefixes (= draft nodes) to keep.
    """
    return [prefix for prefix, _ in top_prefix_counts(conts, num)]


def top_prefix_counts(conts: np.ndarray, num: int) -> list[tuple[list[int], int]]:
    """:func:`top_prefixes` with each prefix's count (how many continuations start with it)."""
    if conts.size == 0 or num <= 0:
        return []
    rows = conts[np.lexsort(conts.T[::-1])]  # lexicographic row order: equal prefixes adjoin
    m, width = rows.shape
    changed = np.ones((m, width), dtype=bool)
    changed[1:] = np.logical_or.accumulate(rows[1:] != rows[:-1], axis=1)
    counts, depths, firsts = [], [], []
    for d in range(width):
        starts = np.flatnonzero(changed[:, d])
        valid = rows[starts, d] >= 0
        counts.append(np.diff(np.append(starts, m))[valid])
        depths.append(np.full(int(valid.sum()), d))
        firsts.append(starts[valid])
    count, depth, first = (np.concatenate(a) for a in (counts, depths, firsts))
    order = np.lexsort((first, depth, -count))[:num]
    return [(rows[first[i], : depth[i] + 1].tolist(), int(count[i])) for i in order]


def stdlib_files() -> list[Path]:
    """The Python standard library's own source files (tests and installed packages excluded)."""
    return _walk(Path(sysconfig.get_paths()["stdlib"]), (".py",))


def _walk(root: Path, suffixes: tuple[str, ...]) -> list[Path]:
    """Files under ``root`` with one of ``suffixes``, sorted, never entering ``SKIP_DIRS``."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        found += [Path(folder) / f for f in files if f.endswith(suffixes)]
    return sorted(found)


def corpus_files(corpus: str) -> list[Path]:
    """Files of a corpus: ``stdlib``, one file, or every text-like file under a folder."""
    if corpus == "stdlib":
        return stdlib_files()
    path = Path(corpus).expanduser()
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise FileNotFoundError(f"datastore corpus {corpus}: no such file or folder")
    return _walk(path, TEXT_SUFFIXES)


def iter_documents(files: Iterable[Path]) -> Iterator[str]:
    """Documents of a corpus: a whole text file, or every text string of each JSON record.

    JSON/JSONL strings without any whitespace (ids, role names) are skipped; every other string
    is its own document, so each chat turn is encoded separately, as REST does.
    """
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".jsonl":
            for line in text.splitlines():
                if line.strip():
                    yield from _json_strings(json.loads(line))
        elif path.suffix == ".json":
            yield from _json_strings(json.loads(text))
        elif text:
            yield text


def _json_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        if any(c.isspace() for c in value.strip()):
            yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _json_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _json_strings(item)


def encode_corpus(
    documents: Iterable[str], tokenizer: Any, vocab_size: int, max_tokens: int, batch: int = 64
) -> np.ndarray:
    """Token ids of the documents, each followed by the separator, cut at ``max_tokens``.

    Documents are read and tokenized lazily, a batch at a time, until the cap is reached.

    Returns:
        unsigned array[T], T <= max_tokens.
    """
    dtype, sep = token_dtype(vocab_size), separator_for(vocab_size)
    parts: list[np.ndarray] = []
    total = 0
    docs = iter(documents)
    while total < max_tokens:
        texts = list(itertools.islice(docs, batch))
        if not texts:
            break
        for ids in _encode_batch(tokenizer, texts):
            parts.append(np.asarray([*ids, sep], dtype=dtype))
            total += len(ids) + 1
    tokens = np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
    return tokens[:max_tokens]


def _encode_batch(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    if not texts:
        return []
    if isinstance(tokenizer, ByteTokenizer):
        return [tokenizer.encode(t) for t in texts]
    return tokenizer(texts, add_special_tokens=False)["input_ids"]


def load_tokenizer(spec: str, vocab_size: int, models_dir: str | Path | None = None) -> Any:
    """A tokenizer from ``byte``, ``auto``, a model config name, a folder or a hub id.

    ``auto`` is the byte tokenizer for the 260-token test vocabulary, else the single cached
    model folder (``models_dir/*``) whose ``config.json`` has this vocabulary size. A model
    config name (e.g. ``smollm2_135m``) means the folder ``models_dir/<name>``.
    """
    spec = auto_tokenizer(vocab_size, models_dir) if spec == "auto" else spec
    if spec == "byte":
        return ByteTokenizer()
    from transformers import AutoTokenizer

    named = Path(models_dir).expanduser() / spec if models_dir else None
    path = str(named) if named is not None and named.is_dir() else str(Path(spec).expanduser())
    if not Path(path).exists():
        path = spec  # a hub id
    return AutoTokenizer.from_pretrained(path)


def auto_tokenizer(vocab_size: int, models_dir: str | Path | None) -> str:
    """Resolve ``tokenizer=auto`` (see :func:`load_tokenizer`) to ``byte`` or a folder."""
    if vocab_size == BYTE_VOCAB:
        return "byte"
    folders = sorted(Path(models_dir).expanduser().glob("*/config.json")) if models_dir else []
    hits = [f.parent for f in folders if config_vocab(f) == vocab_size]
    if len(hits) != 1:
        found = ", ".join(str(h) for h in hits) or "none"
        raise ValueError(
            f"method.tokenizer=auto: {len(hits)} cached model folders with vocab {vocab_size} "
            f"({found}); set method.tokenizer to a model config name or a tokenizer folder"
        )
    return str(hits[0])


def config_vocab(config_json: Path) -> int | None:
    """``vocab_size`` of a model's ``config.json``, or None when unreadable."""
    try:
        return int(json.loads(config_json.read_text())["vocab_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def tokenizer_id(spec: str, vocab_size: int, models_dir: str | Path | None) -> str:
    """Short, path-safe name of a tokenizer spec for cache file names."""
    resolved = auto_tokenizer(vocab_size, models_dir) if spec == "auto" else spec
    return Path(resolved.rstrip("/")).name.replace(" ", "_") or "tokenizer"


def corpus_id(corpus: str) -> str:
    """``stdlib-py3.X`` or ``<name>-<hash of the absolute path>``."""
    if corpus == "stdlib":
        return f"stdlib-py{sys.version_info.major}.{sys.version_info.minor}"
    path = Path(corpus).expanduser().resolve()
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:8]
    return f"{path.stem}-{digest}"


def build_datastore(
    corpus: str, tokenizer: Any, vocab_size: int, max_tokens: int, meta: dict[str, Any]
) -> Datastore:
    """Tokenize a corpus (see :func:`corpus_files`) and build its suffix array."""
    docs = iter_documents(corpus_files(corpus))
    tokens = encode_corpus(docs, tokenizer, vocab_size, max_tokens)
    info = {**meta, "corpus": corpus, "vocab_size": vocab_size, "n_tokens": len(tokens)}
    return Datastore.from_tokens(tokens, separator_for(vocab_size), info)


def corpus_cache_path(
    cache_dir: str | Path,
    folder: str,
    corpus: str,
    tokenizer: str,
    vocab_size: int,
    max_tokens: int,
) -> Path:
    """``<cache_dir>/<folder>/<tokenizer>/<corpus>-<max_tokens>.npz``: where a file built from a
    corpus is cached (``folder``: :data:`DATASTORE_FOLDER` for REST's datastore,
    :data:`methods.common.sam_corpus.AUTOMATON_FOLDER` for SAM's corpus automaton)."""
    models_dir = Path(cache_dir).expanduser() / "models"
    tok = tokenizer_id(tokenizer, vocab_size, models_dir)
    name = f"{corpus_id(corpus)}-{max_tokens}.npz"
    return Path(cache_dir).expanduser() / folder / tok / name


def load_or_build(
    cache_dir: str | Path, corpus: str, tokenizer: str, vocab_size: int, max_tokens: int
) -> Datastore:
    """Load the cached datastore of (corpus, tokenizer, max_tokens), building it if missing.

    The cache key is the corpus path, not its content: delete the file after editing a corpus.
    """
    path = corpus_cache_path(cache_dir, DATASTORE_FOLDER, corpus, tokenizer, vocab_size, max_tokens)
    if path.exists():
        return Datastore.load(path)
    models_dir = Path(cache_dir).expanduser() / "models"
    tok = load_tokenizer(tokenizer, vocab_size, models_dir)
    check_vocab(tokenizer_vocab(tok), vocab_size, f"tokenizer {tokenizer}")
    meta = {"tokenizer": tokenizer_id(tokenizer, vocab_size, models_dir)}
    store = build_datastore(corpus, tok, vocab_size, max_tokens, meta)
    store.save(path)
    return store


def check_vocab(built_vocab: int, vocab_size: int, what: str) -> None:
    """A datastore's ids must come from the target's tokenizer: refuse larger vocabularies."""
    if built_vocab > vocab_size:
        raise ValueError(
            f"{what} has {built_vocab} tokens but the target's vocabulary has {vocab_size}: "
            "the datastore must be built with the target's own tokenizer"
        )


def tokenizer_vocab(tokenizer: Any) -> int:
    """Number of ids a tokenizer can emit (added tokens included)."""
    return len(tokenizer) if hasattr(tokenizer, "__len__") else int(tokenizer.vocab_size)


def target_vocab(spec: str, tokenizer: Any, models_dir: Path) -> int:
    """The model's vocabulary size when ``spec`` names a model folder, else the tokenizer's."""
    for folder in (models_dir / spec, Path(spec).expanduser()):
        vocab = config_vocab(folder / "config.json")
        if vocab is not None:
            return vocab
    return tokenizer_vocab(tokenizer)


def corpus_parser(description: str, folder: str, max_tokens: int) -> argparse.ArgumentParser:
    """The flags of a corpus build (REST's datastore, SAM's automaton): corpus, tokenizer,
    cache folder (``folder`` lives under it), size cap, vocabulary and output file."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--corpus", default="stdlib", help="stdlib | a file or folder")
    parser.add_argument(
        "--tokenizer", required=True, help="byte | model config name | tokenizer folder | hub id"
    )
    parser.add_argument("--cache-dir", default=cache_dir(),
                        help=f"racer_bench cache (models/ and {folder}/ live here)")  # fmt: skip
    parser.add_argument("--max-tokens", type=int, default=max_tokens, help="size cap in tokens")
    parser.add_argument("--vocab-size", type=int, default=None, help="default: the model's")
    parser.add_argument("--out", default=None, help="output .npz (default: the cache path)")
    return parser


@dataclass
class CorpusBuild:
    """What a corpus build needs once its flags are read: tokenizer, vocabulary, output file
    and the metadata that names the tokenizer."""

    tokenizer: Any
    vocab: int
    out: Path
    meta: dict[str, Any]


def corpus_build(args: argparse.Namespace, folder: str) -> CorpusBuild:
    """Tokenizer, vocabulary and output path from :func:`corpus_parser`'s flags (the output
    defaults to ``<cache>/<folder>/<tokenizer>/<corpus>-<max_tokens>.npz``)."""
    models_dir = Path(args.cache_dir).expanduser() / "models"
    tokenizer = load_tokenizer(args.tokenizer, args.vocab_size or 0, models_dir)
    vocab = args.vocab_size or target_vocab(args.tokenizer, tokenizer, models_dir)
    out = Path(args.out) if args.out else corpus_cache_path(
        args.cache_dir, folder, args.corpus, args.tokenizer, vocab, args.max_tokens
    )  # fmt: skip
    meta = {"tokenizer": tokenizer_id(args.tokenizer, vocab, models_dir)}
    return CorpusBuild(tokenizer, vocab, out, meta)
