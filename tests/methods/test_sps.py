"""SpS: the draft model's own greedy chain, adaptive k, vocabulary check, sampling with q."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from methods.sps import SpSDrafter
from racer_bench.engine.structs import Draft, DraftContext, Feedback
from racer_bench.engine.verify.sampling import SamplingVerifier
from racer_bench.errors import ConfigError
from racer_bench.models.loaders import tiny_random
from tests.conftest import TINY_PROMPTS, ar_tokens, run_generate
from tests.integration.test_sampling_lossless import (
    TEMPERATURE,
    chi_square,
    pattern,
    pattern_probs,
)


@pytest.fixture(scope="module")
def draft_model():
    return tiny_random(seed=1)


def test_greedy_chain_is_the_draft_models_greedy_continuation(draft_model) -> None:
    drafter = SpSDrafter(260, draft_model, num_tokens=4)
    prompt = list(TINY_PROMPTS[0])
    drafter.reset(prompt, None)
    expected = ar_tokens(draft_model, prompt, max_new_tokens=8)
    draft = drafter.propose(DraftContext(prompt + expected[:1], expected[0], 64, 64))
    assert draft.tokens.tolist() == expected[1:5]
    assert draft.parents.tolist() == [-1, 0, 1, 2] and draft.q is None
    # After a partial acceptance the cache is rolled back and caught up: still exact.
    committed = prompt + expected[:3]
    fb = Feedback(draft, [0], expected[1:3])
    drafter.update(fb)
    draft = drafter.propose(DraftContext(committed, committed[-1], 64, 64))
    assert draft.tokens.tolist() == expected[3:7]


def test_budget_and_depth_cut_the_chain(draft_model) -> None:
    drafter = SpSDrafter(260, draft_model, num_tokens=6)
    prompt = list(TINY_PROMPTS[1])
    drafter.reset(prompt, None)
    assert len(drafter.propose(DraftContext(prompt, prompt[-1], 3, 64))) == 3
    assert len(drafter.propose(DraftContext(prompt, prompt[-1], 64, 2))) == 2
    assert len(drafter.propose(DraftContext(prompt, prompt[-1], 64, 0))) == 0


def test_adaptive_k_grows_on_full_acceptance_and_shrinks_otherwise(draft_model) -> None:
    drafter = SpSDrafter(260, draft_model, num_tokens=3, adaptive=True, max_tokens=6)
    draft = Draft.chain([1, 2, 3])
    drafter.update(Feedback(draft, [0, 1, 2], [1, 2, 3, 4]))
    assert drafter.k == 5
    drafter.update(Feedback(draft, [0, 1, 2], [1, 2, 3, 4]))
    assert drafter.k == 6  # capped at max_tokens
    drafter.update(Feedback(draft, [0], [1, 9]))
    assert drafter.k == 5
    assert drafter.capacity == 6


def test_vocabulary_mismatch_is_a_config_error(draft_model) -> None:
    with pytest.raises(ConfigError, match=r"method\.draft_model"):
        SpSDrafter(300, draft_model)


def test_target_as_its_own_draft_model_accepts_every_token(tiny_target) -> None:
    twin = tiny_random(seed=0)
    drafter = SpSDrafter(260, twin, num_tokens=4)
    prompt = list(TINY_PROMPTS[2])
    result = run_generate(tiny_target, drafter, prompt, max_new_tokens=25)
    assert result.tokens == ar_tokens(tiny_target, prompt, max_new_tokens=25)
    assert all(s.n_accepted == s.n_draft for s in result.steps)
    assert len(result.steps) == 5  # 25 tokens in steps of k + 1 = 5


def test_sampled_drafts_carry_q_and_keep_the_ar_distribution(tiny_target, draft_model) -> None:
    torch.set_num_threads(1)
    prompt = list(TINY_PROMPTS[2])
    verifier = SamplingVerifier(temperature=TEMPERATURE)
    probs, tops = pattern_probs(tiny_target, verifier, prompt)
    drafter = SpSDrafter(260, draft_model, num_tokens=3, temperature=TEMPERATURE)
    drafter.reset(prompt, None)
    draft = drafter.propose(DraftContext(prompt, prompt[-1], 64, 64))
    assert draft.q is not None and draft.q.shape == (3, 260)
    assert torch.allclose(draft.q.sum(-1), torch.ones(3, dtype=draft.q.dtype))
    n = 200
    counts: Counter = Counter()
    for seed in range(n):
        drafter.seed = 1000 + seed
        out = run_generate(tiny_target, drafter, prompt, 3, verifier=verifier, seed=seed)
        counts[pattern(out.tokens, tops)] += 1
    stat, critical = chi_square(counts, probs, n)
    assert stat < critical
