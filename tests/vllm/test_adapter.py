"""Per-request drafter state behind vLLM (pure: plain token lists, no vLLM)."""

from __future__ import annotations

import torch

from racer_bench.engine.drafter import DrafterNeeds
from racer_bench.engine.structs import Draft, Feedback, Source
from racer_bench.vllm_backend.adapter import DrafterPool, common_prefix


class Recorder:
    """A drafter that proposes a fixed continuation and records every call."""

    name = "recorder"
    version = "1"
    needs = DrafterNeeds(topk=2)
    capacity = 8

    def __init__(self, guess: list[int]) -> None:
        self.guess = guess
        self.resets: list[list[int]] = []
        self.feedback: list[Feedback] = []
        self.contexts: list[list[int]] = []
        self.root_topk: list[torch.Tensor | None] = []

    def reset(self, prompt_ids, prompt_topk) -> None:
        self.resets.append(list(prompt_ids))

    def propose(self, ctx) -> Draft:
        self.contexts.append(list(ctx.tokens))
        self.root_topk.append(ctx.root_topk)
        return Draft.chain(self.guess[: ctx.max_depth], Source.RETRIEVAL)

    def update(self, fb: Feedback) -> None:
        self.feedback.append(fb)


def test_common_prefix():
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([], [1]) == 0
    assert common_prefix([1, 2], [1, 2, 3]) == 2


def test_feedback_matches_what_the_native_loop_would_give():
    drafters: list[Recorder] = []

    def make() -> Recorder:
        drafters.append(Recorder([7, 8, 9]))
        return drafters[-1]

    pool = DrafterPool(make, max_chain=3)
    prompt = [1, 2, 3]
    first_topk = torch.tensor([[4, 5]])
    chain, note = pool.propose("a", [*prompt, 4], 3, first_topk)  # prefill gave 4
    d = drafters[0]
    assert d.resets == [prompt] and d.feedback == []  # no update after the prefill
    assert chain == [7, 8, 9] and note.accepted is None and note.chain == 3
    assert torch.equal(d.root_topk[0], torch.tensor([4, 5]))
    # vLLM verified 7, 8 and rejected 9, the target's own token there was 6
    rows = torch.tensor([[7, 0], [8, 0], [6, 0], [1, 1]])
    chain, note = pool.propose("a", [*prompt, 4, 7, 8, 6], 3, rows)
    fb = d.feedback[-1]
    assert fb.accepted == [0, 1] and fb.committed == [7, 8, 6]
    assert fb.draft.tokens.tolist() == [7, 8, 9]
    assert torch.equal(fb.node_topk, rows)
    assert torch.equal(d.root_topk[-1], torch.tensor([6, 0]))  # the row after 2 accepted
    assert note.accepted == 2 and note.accepted_retrieval == 2 and note.fed_topk
    assert note.has_retrieval


def test_a_chain_cut_short_by_vllm_is_fed_back_as_verified():
    pool = DrafterPool(lambda: Recorder([7, 8, 9]), max_chain=3)
    pool.propose("a", [1, 4], 1, None)
    rows = torch.tensor([[7, 0], [5, 0]])  # only the first chain token was scheduled
    _, note = pool.propose("a", [1, 4, 7, 5], 1, rows)
    fb = pool.live["a"].drafter.feedback[-1]
    assert fb.draft.tokens.tolist() == [7] and fb.accepted == [0]
    assert note.accepted == 1


def test_tokens_the_chain_cannot_explain_skip_the_update():
    pool = DrafterPool(lambda: Recorder([7, 8]), max_chain=2)
    pool.propose("a", [1, 4], 1, None)
    _, note = pool.propose("a", [1, 4, 3, 3, 3], 1, None)  # a step without a proposal
    assert note.accepted == -1
    assert pool.live["a"].drafter.feedback == []
    assert pool.live["a"].drafter.contexts[-1] == [1, 4, 3, 3, 3]  # it proposes from the context


def test_requests_keep_separate_state_and_finished_drafters_are_reused():
    made: list[Recorder] = []

    def make() -> Recorder:
        made.append(Recorder([7]))
        return made[-1]

    pool = DrafterPool(make, max_chain=1)
    pool.propose("a", [1, 2], 1, None)
    pool.propose("b", [5, 6, 2], 2, None)
    assert len(made) == 2
    assert pool.release_missing({"b"}) == ["a"]
    pool.propose("c", [9, 9], 1, None)
    assert len(made) == 2  # "a"'s drafter serves "c", reset on c's prompt
    assert made[0].resets == [[1], [9]]


def test_drafts_never_run_past_the_generation_length():
    pool = DrafterPool(lambda: Recorder([7, 8, 9]), max_chain=3, max_new_tokens=3)
    chain, _ = pool.propose("a", [1, 4], 1, None)  # 1 generated, 2 left: 1 draft + bonus
    assert chain == [7]
    chain, _ = pool.propose("a", [1, 4, 7, 8], 1, None)  # 3 generated: nothing left
    assert chain == []
