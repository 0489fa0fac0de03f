"""Tree-to-chain projection (pure)."""

from __future__ import annotations

import torch

from racer_bench.engine.structs import AuxBranch, Draft, Source
from racer_bench.vllm_backend.chains import best_path, to_chain


def tree(tokens, parents, scores=None, probability=True) -> Draft:
    return Draft(
        tokens=torch.tensor(tokens),
        parents=torch.tensor(parents),
        source=torch.tensor([int(Source.RETRIEVAL)] * len(tokens), dtype=torch.int32),
        score=None if scores is None else torch.tensor(scores, dtype=torch.float32),
        score_is_probability=probability,
    )


def test_a_chain_stays_itself_up_to_the_length():
    draft = Draft.chain([5, 6, 7, 8])
    assert best_path(draft, 10) == [0, 1, 2, 3]
    assert best_path(draft, 2) == [0, 1]
    assert to_chain(draft, 3).tokens.tolist() == [5, 6, 7]


def test_without_probabilities_the_deepest_path_wins_and_ties_go_to_the_first_child():
    #   root -> 0 -> 1          (depth 2)
    #   root -> 2 -> 3 -> 4     (depth 3)
    draft = tree([10, 11, 20, 21, 22], [-1, 0, -1, 2, 3], probability=False)
    assert best_path(draft, 5) == [2, 3, 4]
    assert best_path(draft, 2) == [0, 1]  # both reach depth 2: the first listed wins


def test_probabilities_choose_the_most_expected_accepted_tokens():
    # branch A: 0.9 then 0.9 -> 0.9 + 0.81 = 1.71; branch B: 0.5, 0.5, 0.5 -> 0.875
    draft = tree([1, 2, 3, 4, 5], [-1, 0, -1, 2, 3], scores=[0.9, 0.9, 0.5, 0.5, 0.5])
    assert best_path(draft, 5) == [0, 1]
    # a deep confident branch beats a short one
    draft = tree([1, 3, 4, 5], [-1, -1, 1, 2], scores=[0.6, 0.55, 0.9, 0.9])
    assert best_path(draft, 5) == [1, 2, 3]


def test_projection_keeps_per_node_fields_and_drops_the_aux_branch():
    draft = tree([1, 2, 3], [-1, -1, 1], scores=[0.2, 0.9, 0.9])
    draft.aux = AuxBranch(torch.tensor([9]), torch.tensor([1]), torch.ones(1, 1, dtype=torch.bool))
    chain = to_chain(draft, 4)
    assert chain.tokens.tolist() == [2, 3]
    assert chain.parents.tolist() == [-1, 0]
    assert chain.score.tolist() == [0.8999999761581421, 0.8999999761581421]
    assert chain.aux is None
    assert len(to_chain(Draft.empty(), 4)) == 0
