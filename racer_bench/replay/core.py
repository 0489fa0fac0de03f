"""Replay recorded greedy outputs through drafters, without the model: the steps and MAT.

Greedy decoding is lossless, so a run's autoregressive output fixes every step's verification:
at each step the drafter sees the context so far (prompt + output), its draft is walked along
the actual continuation (for a tree, the longest root path that matches), and the step commits
the accepted tokens plus one bonus token. The replay follows the decode loop
(:mod:`racer_bench.engine.decode`): the first output token comes from the prefill (not a step),
each step's draft is pruned to the room left under ``max_new_tokens``, and a step commits at
most what is left of the output. MAT is tokens committed per step, as in the run summaries.

A drafter is driven through :class:`Replayable` (start a request, draft below a root, commit
the step); :class:`Native` wraps this project's drafters, :class:`BruteSam` is an independent
brute-force check of SAM's longest earlier match. Recorded runs are replayed by
:mod:`racer_bench.replay.runs`; outside reference drafters are in
:mod:`racer_bench.replay.drafters`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from racer_bench.analysis import metrics
from racer_bench.engine.structs import Draft, DraftContext, Feedback
from racer_bench.engine.tree import prune

BIG_BUDGET = 256  # LoopOptions.max_draft: the engine's budget under the fixed scheduler


class Replayable(Protocol):
    """A drafter as the replay drives it."""

    def start(self, prompt: list[int]) -> None:
        """A new request (one turn) with these prompt ids."""

    def draft(self, context: list[int], max_depth: int) -> tuple[list[int], list[int]]:
        """(tokens, parents) below the root ``context[-1]``; parents ``-1`` = the root."""

    def commit(self, tokens: list[int], accepted: list[int]) -> None:
        """The step's committed tokens and the accepted node indices of the last draft."""


def accepted_path(
    tokens: Sequence[int], parents: Sequence[int], actual: Sequence[int]
) -> list[int]:
    """Node indices of the longest root path whose tokens are a prefix of ``actual``.

    At each depth the first child (in draft order) carrying the next actual token is taken;
    a draft has at most one child per token under a node, so the choice is unique in practice.
    """
    children: dict[int, list[int]] = {}
    for i, p in enumerate(parents):
        children.setdefault(p, []).append(i)
    path: list[int] = []
    node = -1
    for token in actual:
        nxt = next((c for c in children.get(node, ()) if tokens[c] == token), None)
        if nxt is None:
            break
        path.append(nxt)
        node = nxt
    return path


@dataclass
class Step:
    pos: int  # output tokens already committed when the step drafted
    n_draft: int
    accepted: int
    committed: int


def prune_lists(tokens: list[int], parents: list[int], budget: int, max_depth: int) -> Draft:
    draft = Draft(tokens=torch.tensor(tokens, dtype=torch.long),
                  parents=torch.tensor(parents, dtype=torch.long))  # fmt: skip
    return prune(draft, budget, max_depth)


def replay(
    drafter: Replayable,
    prompt: list[int],
    output: list[int],
    max_new_tokens: int | None = None,
    budget: int = BIG_BUDGET,
) -> list[Step]:
    """Steps of a greedy decode of ``output`` after ``prompt`` with ``drafter``'s drafts.

    ``output[0]`` comes from the prefill; every step drafts below the last committed token,
    accepts the longest matching root path (cut to what is left of the output) and commits it
    plus the bonus token (when any output is left after it). With ``max_new_tokens``, drafts
    are pruned to the room left under it, as in the decode loop; None: no such cap.
    """
    drafter.start(list(prompt))
    steps: list[Step] = []
    pos = 1
    while pos < len(output):
        context = [*prompt, *output[:pos]]
        room = max_new_tokens - pos if max_new_tokens is not None else len(output)
        max_depth = max(room - 1, 0)  # accepted + bonus fit in the room left, as in the loop
        tokens, parents = drafter.draft(context, max_depth)
        draft = prune_lists(tokens, parents, budget, max_depth)
        tokens, parents = draft.tokens.tolist(), draft.parents.tolist()
        left = output[pos:]
        path = accepted_path(tokens, parents, left)
        committed = min(len(path) + 1, len(left))
        path = path[:committed]
        drafter.commit(left[:committed], path)
        steps.append(Step(pos, len(tokens), len(path), committed))
        pos += committed
    return steps


def replay_mat(steps: Sequence[Step]) -> float:
    """MAT of replayed steps (:func:`racer_bench.analysis.metrics.tokens_per_step`)."""
    return metrics.tokens_per_step([s.committed for s in steps])


class Native:
    """One of this project's drafters (reset / propose / update)."""

    def __init__(self, drafter: Any, budget: int = BIG_BUDGET) -> None:
        self.drafter, self.budget = drafter, budget
        self._last = Draft.empty()

    def start(self, prompt: list[int]) -> None:
        self.drafter.reset(prompt, None)

    def draft(self, context: list[int], max_depth: int) -> tuple[list[int], list[int]]:
        ctx = DraftContext(list(context), context[-1], self.budget, max_depth)
        self._last = prune(self.drafter.propose(ctx), self.budget, max_depth)
        return self._last.tokens.tolist(), self._last.parents.tolist()

    def commit(self, tokens: list[int], accepted: list[int]) -> None:
        self.drafter.update(Feedback(self._last, list(accepted), list(tokens)))


class BruteSam:
    """Longest suffix of the context that occurs earlier; its earliest occurrence's sequel."""

    def __init__(self, capacity: int, alpha: float) -> None:
        self.capacity, self.alpha = capacity, alpha

    def start(self, prompt: list[int]) -> None:
        pass

    def draft(self, context: list[int], max_depth: int) -> tuple[list[int], list[int]]:
        match, end = longest_earlier_match(context)
        n = min(self.capacity, max_depth, int(match * self.alpha)) if match else 0
        chain = context[end + 1 : end + 1 + n]
        return chain, list(range(-1, len(chain) - 1))

    def commit(self, tokens: list[int], accepted: list[int]) -> None:
        pass


def longest_earlier_match(tokens: Sequence[int]) -> tuple[int, int]:
    """(length, end) of the longest suffix of ``tokens`` that also ends at an earlier position
    ``end`` (the earliest such end); (0, -1) when the last token never occurred before."""
    last = len(tokens) - 1
    best, best_end = 0, -1
    for end in range(last):
        n = 0
        while n <= end and tokens[end - n] == tokens[last - n]:
            n += 1
        if n > best:
            best, best_end = n, end
    return best, best_end
