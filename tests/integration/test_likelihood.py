"""Teacher-forced output log-probabilities on the tiny random model."""

from __future__ import annotations

import pytest
import torch

from racer_bench.engine.likelihood import output_logprobs
from tests.conftest import ar_tokens

PROMPT = list(b"the cat sat on the mat. the cat")


def reference(target, context, output) -> float:
    """Sum of log-softmax of a plain full forward, read at the output positions."""
    logp = torch.log_softmax(target.full_logits([*context, *output]), dim=-1)
    return float(sum(logp[len(context) - 1 + i, tok] for i, tok in enumerate(output)))


def test_matches_a_plain_forward_one_by_one_and_batched(tiny_target):
    greedy = ar_tokens(tiny_target, PROMPT, max_new_tokens=8)
    other = [greedy[0], *(t + 1 for t in greedy[1:])]  # same length: one batched forward
    values = output_logprobs(tiny_target, [(PROMPT, greedy), (PROMPT, other), (PROMPT[:5], [7])])
    expected = [reference(tiny_target, PROMPT, greedy), reference(tiny_target, PROMPT, other),
                reference(tiny_target, PROMPT[:5], [7])]  # fmt: skip
    assert values == pytest.approx(expected, rel=1e-9, abs=1e-9)
    assert values[0] > values[1]  # the greedy continuation is the likelier one
    assert all(v < 0 for v in values)


def test_equal_outputs_get_exactly_equal_values_and_empty_is_zero(tiny_target):
    greedy = ar_tokens(tiny_target, PROMPT, max_new_tokens=8)
    values = output_logprobs(tiny_target, [(PROMPT, greedy), (PROMPT, []), (PROMPT, greedy)])
    assert values[0] - values[2] == 0.0
    assert values[1] == 0.0


def test_the_fast_engine_gives_the_same_values(tiny_fast_target):
    greedy = ar_tokens(tiny_fast_target, PROMPT, max_new_tokens=8)
    other = [greedy[0], *(t + 1 for t in greedy[1:])]
    pairs = [(PROMPT, greedy), (PROMPT, other)]
    fast = output_logprobs(tiny_fast_target, pairs)
    expected = [reference(tiny_fast_target, c, o) for c, o in pairs]
    assert fast == pytest.approx(expected, rel=1e-9, abs=1e-9)
