"""SuffixDecoding and SAM-Decoding under speculative sampling on the tiny model.

Both propose point-mass drafts, so with the same seed they must consume the uniforms AR
sampling consumes and reproduce AR sampling token for token (see
``tests/integration/test_sampling_lossless.py`` for why this is the strongest check).
"""

from __future__ import annotations

import pytest

from methods.sam import SamDrafter
from methods.suffix import SuffixDrafter
from racer_bench.engine.verify.sampling import SamplingVerifier
from tests.conftest import TINY_PROMPTS, ar_tokens, run_generate
from tests.helpers import copyable_prompt


def make(name: str, vocab_size: int):
    if name == "suffix":
        return SuffixDrafter(vocab_size, max_spec_tokens=8, max_spec_factor=2.0)
    return SamDrafter(vocab_size, capacity=8)


@pytest.mark.parametrize("name", ["suffix", "sam"])
def test_point_mass_drafts_reproduce_ar_samples(name, tiny_target):
    verifier = SamplingVerifier(temperature=0.6)
    drafter = make(name, tiny_target.vocab_size)
    accepted = 0
    prompts = [copyable_prompt(tiny_target)] * 4 + [list(p) for p in TINY_PROMPTS[:2]]
    for seed, prompt in enumerate(prompts):
        kwargs = {"max_new_tokens": 24, "verifier": verifier, "seed": seed}
        got = run_generate(tiny_target, drafter, prompt, **kwargs)
        assert got.tokens == ar_tokens(tiny_target, prompt, **kwargs), f"{name}, seed {seed}"
        accepted += sum(step.n_accepted for step in got.steps)
    assert accepted >= 1  # the speculative path was exercised
