"""REST datastore: suffix array, longest-suffix lookup, prefix counts, build/save/load."""

from __future__ import annotations

import json
import runpy
import sys

import numpy as np
import pytest

from methods.common.datastore import (
    DATASTORE_FOLDER,
    Datastore,
    auto_tokenizer,
    build_datastore,
    check_vocab,
    corpus_cache_path,
    corpus_files,
    encode_corpus,
    iter_documents,
    load_or_build,
    separator_for,
    token_dtype,
    top_prefixes,
)
from racer_bench.models.tiny_tokenizer import ByteTokenizer
from tests.conftest import REPO

SEP = separator_for(260)


def store_of(tokens: list[int], vocab: int = 260) -> Datastore:
    return Datastore.from_tokens(np.asarray(tokens, dtype=token_dtype(vocab)), separator_for(vocab))


def matches(store: Datastore, query: list[int]) -> set[int]:
    lo, hi = store.match_range(query)
    return set(store.sa[lo:hi].tolist())


def naive_matches(tokens: list[int], query: list[int]) -> set[int]:
    n = len(query)
    return {i for i in range(len(tokens) - n + 1) if tokens[i : i + n] == query}


@pytest.mark.parametrize("vocab", [7, 300, 70_000])
def test_suffix_array_is_the_sorted_suffix_order(vocab):
    rng = np.random.default_rng(vocab)
    tokens = rng.integers(0, min(vocab, 2**31), size=500).astype(token_dtype(vocab))
    store = Datastore.from_tokens(tokens, separator_for(vocab))
    naive = sorted(range(len(tokens)), key=lambda i: tokens[i:].tolist())
    assert store.sa.tolist() == naive


def test_match_range_finds_every_occurrence():
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 4, size=400).tolist()
    store = store_of(tokens)
    for query in ([1], [1, 2], [3, 3, 0], [0, 1, 2, 3], [2, 2, 2, 2, 2, 2, 2]):
        assert matches(store, query) == naive_matches(tokens, query)
    assert matches(store, [9]) == set()


def test_longest_match_prefers_the_longest_suffix():
    tokens = [5, 6, 7, 1, 2, 3, 4, SEP, 9, 2, 3, 8, SEP]
    store = store_of(tokens)
    # suffix [1, 2, 3] occurs once; [2, 3] twice: the longer one wins
    span, lo, hi = store.longest_match([0, 1, 2, 3], max_span=16, min_span=2)
    assert (span, hi - lo) == (3, 1)
    assert store.sa[lo] == 3
    span, lo, hi = store.longest_match([0, 2, 3], max_span=16, min_span=2)
    assert (span, hi - lo) == (2, 2)
    assert store.longest_match([0, 4, 4], max_span=16, min_span=2) == (0, 0, 0)
    # min_span bounds the search: the 1-token suffix [3] is not tried with min_span 2
    assert store.longest_match([7, 3], max_span=16, min_span=2)[0] == 0
    assert store.longest_match([7, 3], max_span=16, min_span=1)[0] == 1


def test_longest_match_equals_a_scan_from_the_longest_span():
    rng = np.random.default_rng(2)
    tokens = rng.integers(0, 3, size=3000).tolist()
    store = store_of(tokens)
    for _ in range(50):
        context = rng.integers(0, 3, size=20).tolist()
        span, lo, hi = store.longest_match(context, max_span=16, min_span=2)
        scan = next((s for s in range(16, 1, -1) if naive_matches(tokens, context[-s:])), 0)
        assert span == scan
        if span:
            assert set(store.sa[lo:hi].tolist()) == naive_matches(tokens, context[-span:])


def test_continuations_stop_at_separator_and_corpus_end_and_respect_k():
    tokens = [1, 2, 3, 4, SEP, 1, 2, 5, 1, 2]
    store = store_of(tokens)
    span, lo, hi = store.longest_match([1, 2], 2, 2)
    conts = store.continuations(lo, hi, span, k=10, long=3)
    got = sorted(tuple(row) for row in conts.tolist())
    assert got == [(-1, -1, -1), (3, 4, -1), (5, 1, 2)]
    assert len(store.continuations(lo, hi, span, k=2, long=3)) == 2


def test_top_prefixes_counts_every_prefix():
    conts = np.array(
        [[1, 2, 3], [1, 2, 4], [1, 2, 3], [1, 5, -1], [6, -1, -1], [1, 2, 3]], dtype=np.int64
    )
    # counts: [1]=5, [1,2]=4, [1,2,3]=3, [1,2,4]=1, [1,5]=1, [6]=1
    assert top_prefixes(conts, 3) == [[1], [1, 2], [1, 2, 3]]
    top = top_prefixes(conts, 6)
    assert top[:3] == [[1], [1, 2], [1, 2, 3]]
    assert top[3] == [6]  # ties (count 1): the shorter prefix first
    assert sorted(top[4:]) == [[1, 2, 4], [1, 5]]
    assert top_prefixes(conts, 100) == top  # never more prefixes than exist
    assert top_prefixes(np.full((3, 2), -1), 4) == []


def test_top_prefixes_are_prefix_closed_and_parents_first():
    rng = np.random.default_rng(1)
    conts = rng.integers(0, 3, size=(200, 6))
    for num in (1, 5, 17, 40):
        top = top_prefixes(conts, num)
        assert len(top) == num
        seen: set[tuple[int, ...]] = set()
        for prefix in top:
            assert len(prefix) == 1 or tuple(prefix[:-1]) in seen
            seen.add(tuple(prefix))


def test_save_load_round_trip(tmp_path):
    store = store_of([3, 1, 2, SEP, 1, 2, 3])
    store.meta = {"tokenizer": "byte", "vocab_size": 260}
    path = store.save(tmp_path / "sub" / "ds.npz")
    loaded = Datastore.load(path)
    assert np.array_equal(loaded.tokens, store.tokens)
    assert loaded.tokens.dtype == store.tokens.dtype
    assert np.array_equal(loaded.sa, store.sa)
    assert loaded.separator == SEP
    assert loaded.meta == store.meta
    assert loaded.match_range([1, 2]) == store.match_range([1, 2])


def write_corpus(folder):
    folder.mkdir()
    (folder / "a.txt").write_text("abc abc")
    rows = [{"id": "x1", "conversations": [{"from": "human", "value": "hi there"}]}]
    (folder / "b.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    (folder / "skip.bin").write_text("not text")
    return folder


def test_documents_from_text_and_jsonl(tmp_path):
    folder = write_corpus(tmp_path / "corpus")
    docs = list(iter_documents(corpus_files(str(folder))))  # skip.bin is not a text file
    assert docs == ["abc abc", "hi there"]  # ids and role names have no whitespace: skipped


def test_build_datastore_separates_documents(tmp_path):
    folder = write_corpus(tmp_path / "corpus")
    store = build_datastore(str(folder), ByteTokenizer(), 260, 1000, {"tokenizer": "byte"})
    expected = [*b"abc abc", SEP, *b"hi there", SEP]
    assert store.tokens.tolist() == expected
    assert store.meta["n_tokens"] == len(expected)
    capped = encode_corpus(["abcdef", "ghi"], ByteTokenizer(), 260, max_tokens=4)
    assert capped.tolist() == list(b"abcd")


def test_load_or_build_caches_by_corpus_and_tokenizer(tmp_path):
    folder = write_corpus(tmp_path / "corpus")
    cache = tmp_path / "cache"
    path = corpus_cache_path(cache, DATASTORE_FOLDER, str(folder), "byte", 260, 1000)
    assert path.parent == cache / "datastores" / "byte"
    assert not path.exists()
    built = load_or_build(cache, str(folder), "byte", 260, 1000)
    assert path.exists()
    again = load_or_build(cache, str(folder), "byte", 260, 1000)
    assert np.array_equal(again.tokens, built.tokens)
    assert corpus_cache_path(cache, DATASTORE_FOLDER, str(folder), "byte", 260, 10) != path


def test_auto_tokenizer_resolution(tmp_path):
    assert auto_tokenizer(260, None) == "byte"
    for name, vocab in (("m1", 1000), ("m2", 2000), ("m3", 2000)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps({"vocab_size": vocab}))
    assert auto_tokenizer(1000, tmp_path) == str(tmp_path / "m1")
    with pytest.raises(ValueError, match="2 cached model folders"):
        auto_tokenizer(2000, tmp_path)
    with pytest.raises(ValueError, match="0 cached model folders"):
        auto_tokenizer(3000, tmp_path)


def test_check_vocab_refuses_larger_tokenizer():
    check_vocab(260, 260, "x")
    with pytest.raises(ValueError, match="target's own tokenizer"):
        check_vocab(50_000, 260, "x")


def test_build_script_writes_where_the_drafter_looks(tmp_path, monkeypatch, capsys):
    folder = write_corpus(tmp_path / "corpus")
    cache = tmp_path / "cache"
    script = runpy.run_path(str(REPO / "scripts" / "build_datastore.py"))
    argv = ["build_datastore.py", "--corpus", str(folder), "--tokenizer", "byte"]
    argv += ["--cache-dir", str(cache), "--max-tokens", "100", "--vocab-size", "260"]
    monkeypatch.setattr(sys, "argv", argv)
    script["main"]()
    path = corpus_cache_path(cache, DATASTORE_FOLDER, str(folder), "auto", 260, 100)
    assert str(path) in capsys.readouterr().out
    assert Datastore.load(path).tokens.tolist()[:7] == list(b"abc abc")
