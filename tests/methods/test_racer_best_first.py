"""RACER best-first selection: estimates, ordering, prefix closure, window continuation."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

from methods.racer import RacerDrafter
from methods.racer.automaton import Automaton
from methods.racer.best_first import RANK_PRIOR, RankRates, grow_best_first, retrieval_p
from racer_bench.engine.structs import Draft, DraftContext, Source
from racer_bench.engine.tree import TrieBuilder, check_draft
from racer_bench.errors import ConfigError

# "5 6 7" is followed by 8 once; the shorter "6 7" by 1, 2 and 3 twice each (and 8 once).
SPREAD = [5, 6, 7, 8, 9, 6, 7, 1, 0, 6, 7, 1, 0, 6, 7, 2, 0, 6, 7, 2, 0, 6, 7, 3, 0, 6, 7, 3, 0]


def ctx_for(tokens: list[int], budget: int = 64, max_depth: int = 64) -> DraftContext:
    return DraftContext(list(tokens), tokens[-1], budget, max_depth)


def retrieval_drafter(**kwargs) -> RacerDrafter:
    return RacerDrafter(vocab_size=50, ngram=4, logits=False, **kwargs)


def test_retrieval_estimate_is_the_smoothed_continuation_share():
    assert retrieval_p(3, 4, 0.0) == 0.75
    assert retrieval_p(1, 1, 0.1) == pytest.approx(1 / 1.1)


def test_rank_rates_start_at_the_prior_and_learn_from_live_logits_nodes():
    rates = RankRates(width=3, prior_strength=4.0)
    assert rates.rate(0, 1) == pytest.approx(RANK_PRIOR[0])
    assert rates.rate(2, 7) == pytest.approx(RANK_PRIOR[2])
    # root -> a (rank 0, accepted) -> b (rank 0, rejected); root -> c (rank 1, rejected);
    # a retrieval node under the root, and a logits node under the rejected c (not counted)
    draft = Draft(
        tokens=torch.tensor([1, 2, 3, 4, 5]),
        parents=torch.tensor([-1, 0, -1, -1, 2]),
        source=torch.tensor([2, 2, 2, 1, 2]),
        rank=torch.tensor([0, 0, 1, -1, 0]),
    )
    rates.observe(draft, [0])
    assert rates.rate(0, 1) == pytest.approx((4 * RANK_PRIOR[0] + 1) / 5)
    assert rates.rate(1, 1) == pytest.approx(4 * RANK_PRIOR[1] / 5)
    assert rates.rate(0, 2) == pytest.approx(4 * RANK_PRIOR[0] / 5)
    assert rates.rate(0, 3) == pytest.approx(RANK_PRIOR[0])  # depth >= 3: no observation
    rates.clear()
    assert rates.rate(0, 1) == pytest.approx(RANK_PRIOR[0])


def test_a_long_match_seen_once_beats_the_spread_continuations_of_a_short_one():
    context = [*SPREAD, 5, 6, 7]  # the root 7 matches "5 6 7" and "6 7"
    paper = retrieval_drafter(selection="reference").propose(ctx_for(context, budget=1))
    assert paper.tokens.tolist()[0] in (1, 2, 3)  # raw counts: a child of "6 7"
    best = retrieval_drafter(selection="best_first")
    best.reset(SPREAD, None)
    draft = best.propose(ctx_for(context, budget=1))
    assert draft.tokens.tolist() == [8]
    assert draft.score.tolist() == pytest.approx([retrieval_p(1, 1, best.retrieval_alpha)])
    wide = best.propose(ctx_for(context, budget=5)).tokens.tolist()
    assert wide == [8, 9, 6, 7, 1]  # the copied passage (p = 1 / 1.1 per token) before 2 / 7.1


def random_setup(seed: int) -> tuple[Automaton, list[int], dict[int, list[int]]]:
    rng = random.Random(seed)
    automaton = Automaton(max_nodes=400, fail_links="exact")
    for _ in range(40):
        automaton.insert([rng.randrange(5) for _ in range(5)])
    rows = {t: rng.sample(range(8), 4) for t in range(8) if rng.random() < 0.8}
    return automaton, list(automaton.children[0].values())[:3], rows


@pytest.mark.parametrize("seed", range(8))
def test_best_first_trees_are_prefix_closed_unique_and_ordered(seed):
    automaton, borders, rows = random_setup(seed)
    budget = random.Random(seed).randrange(1, 30)
    builder = TrieBuilder(budget)
    scores = grow_best_first(
        builder,
        root=3,
        borders=borders,
        retrieval_children=lambda n: automaton.continuations(n, None),
        freq=automaton.freq,
        rows=rows.get,
        rates=RankRates(4),
        max_depth=4,
        max_breadth=3,
        retrieval_alpha=0.1,
    )
    draft = builder.build()
    check_draft(draft, budget)
    pairs = list(zip(builder.parents, builder.tokens, strict=True))
    assert len(set(pairs)) == len(pairs) == len(scores)
    assert all(0.0 < s <= 1.0 for s in scores)
    path = []  # path score = product of p from the root; never grows along a path
    for parent, score in zip(builder.parents, scores, strict=True):
        path.append(score * (path[parent] if parent >= 0 else 1.0))
        assert parent < 0 or path[-1] <= path[parent] + 1e-12
    assert max((d for d in _depths(builder.parents)), default=0) <= 4


def _depths(parents: list[int]) -> list[int]:
    out: list[int] = []
    for p in parents:
        out.append(1 if p < 0 else out[p] + 1)
    return out


def test_budget_goes_to_whichever_source_is_likelier():
    automaton = Automaton(fail_links="exact")
    automaton.insert([1, 2, 3, 4])  # one occurrence: p = 1 / 1.1 per retrieval step
    border = automaton.walk([1, 2])
    rows = {2: [7, 8], 3: [9, 8], 4: [5, 6], 7: [5, 6]}.get
    builder = TrieBuilder(3)
    grow_best_first(builder, 2, [border], lambda n: automaton.continuations(n, None),
                    automaton.freq, rows, RankRates(2), 8, 2, 0.1)  # fmt: skip
    assert builder.tokens == [3, 4, 7]  # the retrieval chain (0.91, 0.83) before rank 0 (0.45)
    assert builder.sources == [Source.RETRIEVAL, Source.RETRIEVAL, Source.LOGITS]


def test_continuations_go_past_a_full_window():
    automaton = Automaton(fail_links="exact")
    text = [1, 2, 3, 4, 5, 6, 7]
    for start in range(len(text) - 3):
        automaton.insert(text[start : start + 4])
    leaf = automaton.walk([1, 2, 3, 4])
    assert automaton.continuations(leaf, None) == (leaf, {})
    source, kids = automaton.continuations(leaf, 4)
    assert source == automaton.walk([2, 3, 4]) and list(kids) == [5]
    last = automaton.walk([4, 5, 6, 7])  # no suffix of it has children: nothing to continue
    assert automaton.continuations(last, 4) == (last, {})


def test_best_first_copies_past_the_window_length_unless_disabled():
    text = list(range(10, 30))
    context = [*text, *text[:3]]  # the root repeats text[2]
    long = retrieval_drafter(selection="best_first").propose(ctx_for(context))
    assert long.tokens.tolist()[:17] == text[3:]  # the rest of the passage, one chain
    short = retrieval_drafter(selection="best_first", extend_windows=False).propose(
        ctx_for(context)
    )
    assert short.tokens.tolist() == text[3:5]  # the shortest border, "11 12", has 2 more tokens


@pytest.mark.parametrize("selection", ["reference", "best_first"])
def test_every_node_gets_a_score(selection):
    drafter = RacerDrafter(vocab_size=4096, ngram=4, capacity=20, selection=selection)
    drafter.reset(SPREAD, torch.zeros(len(SPREAD), 8, dtype=torch.long))
    tokens = np.arange(4096)
    drafter.token_bin.update(tokens, (8 * tokens[:, None] + np.arange(1, 9)) % 4096)
    draft = drafter.propose(ctx_for([*SPREAD, 5, 6, 7]))
    assert len(draft) == 20
    assert draft.score.shape == (20,)
    assert all(0.0 < s <= 1.0 and not math.isnan(s) for s in draft.score.tolist())
    sources = draft.source.tolist()
    assert int(Source.RETRIEVAL) in sources and int(Source.LOGITS) in sources


def test_rejects_an_unknown_selection_and_a_negative_alpha():
    with pytest.raises(ConfigError, match=r"method\.selection=greedy"):
        RacerDrafter(vocab_size=50, selection="greedy")
    with pytest.raises(ConfigError, match=r"method\.retrieval_alpha=-1"):
        RacerDrafter(vocab_size=50, retrieval_alpha=-1)
