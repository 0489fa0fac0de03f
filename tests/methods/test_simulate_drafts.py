"""The model-free replay (racer_bench.replay.core, driven by scripts/simulate_drafts.py) on
hand-made token sequences."""

from __future__ import annotations

import math
import random

import pytest

from methods.sam import SamDrafter
from racer_bench.replay import core as sd


class Scripted:
    """Drafts from a table {output position: (tokens, parents)}; records what it was told."""

    def __init__(self, drafts: dict[int, tuple[list[int], list[int]]], prompt_len: int) -> None:
        self.drafts, self.prompt_len = drafts, prompt_len
        self.contexts: list[list[int]] = []
        self.commits: list[tuple[list[int], list[int]]] = []

    def start(self, prompt: list[int]) -> None:
        self.started = list(prompt)

    def draft(self, context: list[int], max_depth: int) -> tuple[list[int], list[int]]:
        self.contexts.append(list(context))
        return self.drafts.get(len(context) - self.prompt_len, ([], []))

    def commit(self, tokens: list[int], accepted: list[int]) -> None:
        self.commits.append((list(tokens), list(accepted)))


def test_accepted_path_follows_the_matching_branch():
    # root -> 5 (node 0); below it 6 (node 1, then 7 = node 3) and 9 (node 2)
    tokens, parents = [5, 6, 9, 7], [-1, 0, 0, 1]
    assert sd.accepted_path(tokens, parents, [5, 9, 1]) == [0, 2]
    assert sd.accepted_path(tokens, parents, [5, 6, 7, 8]) == [0, 1, 3]
    assert sd.accepted_path(tokens, parents, [6]) == []
    assert sd.accepted_path([], [], [1, 2]) == []


def test_replay_commits_accepted_plus_bonus_and_counts_mat():
    prompt, output = [1, 2], [10, 11, 12, 13, 14, 15, 16]
    drafts = {
        1: ([11, 12, 99], [-1, 0, 1]),  # two accepted, then the bonus 13
        4: ([14, 77, 15, 16], [-1, -1, 0, 2]),  # the tree's 14 -> 15 -> 16 path: to the end
    }
    drafter = Scripted(drafts, len(prompt))
    steps = sd.replay(drafter, prompt, output)
    assert [(s.pos, s.n_draft, s.accepted, s.committed) for s in steps] == [
        (1, 3, 2, 3),
        (4, 4, 3, 3),  # nothing left for a bonus
    ]
    assert drafter.started == prompt
    assert drafter.contexts == [[1, 2, 10], [1, 2, 10, 11, 12, 13]]
    assert drafter.commits == [([11, 12, 13], [0, 1]), ([14, 15, 16], [0, 2, 3])]
    assert sd.replay_mat(steps) == 3.0


def test_replay_without_drafts_is_autoregressive_and_prunes_to_the_room():
    prompt, output = [1], [10, 11, 12, 13]
    assert [s.committed for s in sd.replay(Scripted({}, 1), prompt, output)] == [1, 1, 1]
    # max_new_tokens 4: at position 1 the room is 3 tokens, so drafts are cut to depth 2
    deep = Scripted({1: ([11, 12, 13], [-1, 0, 1])}, 1)
    steps = sd.replay(deep, prompt, output, max_new_tokens=4)
    assert [(s.n_draft, s.accepted, s.committed) for s in steps] == [(2, 2, 3)]
    assert sd.replay(Scripted({}, 1), prompt, [10]) == []  # the prefill token only
    assert math.isnan(sd.replay_mat([]))


@pytest.mark.parametrize("seed", range(4))
def test_brute_force_match_agrees_with_the_sam_drafter(seed):
    rng = random.Random(seed)
    prompt = [rng.randrange(4) for _ in range(30)]
    output = [rng.randrange(4) for _ in range(60)]
    ours = sd.replay(sd.Native(SamDrafter(vocab_size=10, capacity=7, alpha=2.0)), prompt, output)
    brute = sd.replay(sd.BruteSam(capacity=7, alpha=2.0), prompt, output)
    assert [s.committed for s in ours] == [s.committed for s in brute]


def test_longest_earlier_match_takes_the_earliest_end():
    assert sd.longest_earlier_match([1, 2, 3, 1, 2, 4, 1, 2]) == (2, 1)
    assert sd.longest_earlier_match([1, 2, 3]) == (0, -1)
    assert sd.longest_earlier_match([7, 7, 7]) == (2, 1)
