"""SAM-Decoding drafter: dynamic chains, static corpus trees, the corpus builder (no model)."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

from methods.common.datastore import corpus_cache_path, separator_for
from methods.common.sam_corpus import AUTOMATON_FOLDER
from methods.common.suffix_automaton import FrozenAutomaton, SuffixAutomaton
from methods.sam import SamDrafter, static_tree
from racer_bench.engine.structs import Draft, DraftContext, Feedback, Source
from racer_bench.engine.tree import check_draft, node_depths, path_to
from tests.conftest import REPO

SEP = separator_for(260)


def ctx_of(tokens: list[int], budget: int = 64, max_depth: int = 64) -> DraftContext:
    return DraftContext(tokens=list(tokens), root=tokens[-1], budget=budget, max_depth=max_depth)


def corpus_file(tmp_path: Path, tokens: list[int]) -> str:
    sam = SuffixAutomaton()
    sam.extend(tokens)
    meta = {"vocab_size": 260, "separator": SEP}
    return str(sam.freeze(meta).save(tmp_path / "corpus.npz"))


def paths_of(draft: Draft) -> set[tuple[int, ...]]:
    tokens, parents = draft.tokens.tolist(), draft.parents.tolist()
    return {tuple(tokens[j] for j in path_to(i, parents)) for i in range(len(tokens))}


def test_dynamic_chain_copies_the_earliest_continuation():
    drafter = SamDrafter(vocab_size=260, alpha=2.0)
    assert drafter.static_corpus == "none" and drafter.persist_across_prompts is False
    prompt = [1, 2, 3, 4, 5, 1, 2, 6, 7, 8, 9, 1]
    drafter.reset(prompt, None)
    draft = drafter.propose(ctx_of([*prompt, 2]))  # the first root arrives with the context
    check_draft(draft)
    assert draft.tokens.tolist() == [3, 4, 5, 1]  # "1 2" first ended at index 1; 2 * 2 tokens
    assert draft.parents.tolist() == [-1, 0, 1, 2]
    assert set(draft.source.tolist()) == {int(Source.RETRIEVAL)}
    assert draft.score.tolist() == [2.0] * 4
    assert draft.meta["dyn_match"] == 2.0 and draft.meta["static_draft"] == 0.0
    assert len(drafter.propose(ctx_of([*prompt, 2], budget=3))) == 3
    assert len(drafter.propose(ctx_of([*prompt, 2], max_depth=2))) == 2


def test_update_moves_the_match_and_no_match_means_no_draft():
    drafter = SamDrafter(vocab_size=260, alpha=1.0)
    drafter.reset([1, 2, 3, 4, 9], None)
    assert len(drafter.propose(ctx_of([1, 2, 3, 4, 9, 8]))) == 0  # 8 never seen before
    drafter.update(Feedback(draft=Draft.empty(), accepted=[], committed=[1, 2, 3]))
    draft = drafter.propose(ctx_of([1, 2, 3, 4, 9, 8, 1, 2, 3]))
    assert draft.tokens.tolist() == [4, 9, 8]
    drafter.reset([5, 6], None)  # a new prompt forgets the old text
    assert len(drafter.propose(ctx_of([5, 6, 1]))) == 0


def test_static_tree_is_best_first_by_occurrence_ratio():
    corpus = [7, 1, 2, SEP, 7, 1, 2, SEP, 7, 1, 3, SEP, 7, 4, SEP]
    sam = SuffixAutomaton()
    sam.extend(corpus)
    frozen = sam.freeze()
    state = 0
    for token in (7,):
        state = frozen.step(state, token)
    tokens, parents = static_tree(frozen, state, 10, 10, topk=8, skip=SEP)
    # after 7: 1 (3/4) -> 2 (2/4), 3 (1/4); 4 (1/4); the separator is never drafted
    assert tokens == [1, 2, 4, 3]
    assert parents == [-1, 0, -1, 0]
    narrow, _ = static_tree(frozen, state, 10, 10, topk=1, skip=SEP)
    assert narrow == [1, 2]  # one child per state, one node per depth
    shallow, _ = static_tree(frozen, state, 10, 1, topk=8, skip=SEP)
    assert shallow == [1, 4]


def test_static_automaton_drafts_when_its_match_is_longer(tmp_path):
    path = corpus_file(tmp_path, [5, 6, 7, 8, 9, 10, SEP, 5, 6, 7, 8, 11, SEP])
    drafter = SamDrafter(vocab_size=260, alpha=1.0, corpus_automaton=path)
    assert drafter.static_corpus == path
    drafter.reset([1, 5, 6, 7], None)
    draft = drafter.propose(ctx_of([1, 5, 6, 7, 8]))
    check_draft(draft)
    assert draft.meta["static_match"] == 4.0 and draft.meta["static_draft"] == 1.0
    assert paths_of(draft) == {(9,), (9, 10), (11,)}  # 4 nodes allowed, 3 exist
    assert max(node_depths(draft.parents.tolist())) == 2
    biased = SamDrafter(vocab_size=260, alpha=1.0, corpus_automaton=path, len_bias=4)
    biased.reset([1, 5, 6, 7], None)
    assert biased.propose(ctx_of([1, 5, 6, 7, 8])).meta["static_draft"] == 0.0


def test_corpus_automaton_from_a_larger_vocabulary_is_refused(tmp_path):
    path = corpus_file(tmp_path, [1, 2, 3])
    with pytest.raises(ValueError, match="target's own tokenizer"):
        SamDrafter(vocab_size=100, corpus_automaton=path)


def test_build_script_writes_a_loadable_corpus_automaton(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.txt").write_text("abc abc abd")
    (folder / "b.txt").write_text("xyz")
    cache = tmp_path / "cache"
    script = runpy.run_path(str(REPO / "scripts" / "build_sam_corpus.py"))
    argv = ["build_sam_corpus.py", "--corpus", str(folder), "--tokenizer", "byte"]
    argv += ["--cache-dir", str(cache), "--max-tokens", "100", "--vocab-size", "260"]
    monkeypatch.setattr(sys, "argv", argv)
    out = script["main"]()
    assert out == corpus_cache_path(cache, AUTOMATON_FOLDER, str(folder), "byte", 260, 100)
    assert out.parent == cache / "sam" / "byte"  # where earlier versions cached it
    assert str(out) in capsys.readouterr().out
    sam = FrozenAutomaton.load(out)
    assert sam.meta["n_tokens"] == len("abc abc abd") + 1 + len("xyz") + 1
    state = 0
    for token in b"abc":
        state = sam.step(state, token)
    assert sam.count[state] == 2
    drafter = SamDrafter(vocab_size=260, alpha=4.0, corpus_automaton=str(out))
    drafter.reset(list(b"q ab"), None)
    assert paths_of(drafter.propose(ctx_of(list(b"q abc")))) >= {(ord(" "),), (ord(" "), 97)}
