from __future__ import annotations

import torch

from racer_bench.engine.structs import Draft
from racer_bench.engine.verify.greedy import GreedyVerifier, greedy_accept


def one_hot_logits(argmax: list[int], vocab: int = 10) -> torch.Tensor:
    logits = torch.zeros(len(argmax), vocab)
    logits[torch.arange(len(argmax)), torch.tensor(argmax)] = 5.0
    return logits


def test_greedy_accepts_longest_matching_path():
    # root -> a(0)=3 -> c(2)=5 ; root -> b(1)=4 -> d(3)=6 -> e(4)=7
    tokens, parents = [3, 4, 5, 6, 7], [-1, -1, 0, 1, 3]
    # target: after root 4, after b 6, after d 7, after e 1
    argmax = [4, 0, 6, 0, 7, 1]
    assert greedy_accept(tokens, parents, argmax) == ([1, 3, 4], 1)


def test_greedy_empty_draft_gives_bonus_only():
    assert greedy_accept([], [], [9]) == ([], 9)


def test_greedy_nothing_matches():
    assert greedy_accept([1, 2], [-1, 0], [7, 1, 2]) == ([], 7)


def test_greedy_first_of_equally_deep_paths_wins():
    # duplicate siblings (LogitSpec chains may repeat tokens): first one wins
    accepted, bonus = greedy_accept([3, 3], [-1, -1], [3, 8, 9])
    assert accepted == [0] and bonus == 8


def test_verifier_object_uses_logits():
    draft = Draft(tokens=torch.tensor([2, 3]), parents=torch.tensor([-1, 0]))
    result = GreedyVerifier().verify(draft, one_hot_logits([2, 3, 4]), torch.Generator())
    assert result.accepted == [0, 1] and result.bonus == 4
