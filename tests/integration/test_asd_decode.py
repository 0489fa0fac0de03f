"""ASD in the decode loop on the tiny model.

* budget, gate or cap = 0: token-identical to strict greedy (and to AR) with PLD and with an
  oracle drafter whose every third token is corrupted (chains and trees);
* otherwise every emitted token is the target's argmax under the realized prefix except the
  relaxed ones, whose number and regret (recomputed with a fresh full forward) match what the
  steps recorded and stay within the request budget and the per-step cap.
"""

from __future__ import annotations

import pytest
import torch

from methods.pld import PLDDrafter
from racer_bench.engine.structs import GenerationResult
from racer_bench.engine.target import HFTarget
from racer_bench.engine.verify.asd import ASDVerifier
from tests.conftest import TINY_PROMPTS, ar_tokens, run_generate
from tests.helpers import OracleDrafter

MAX_NEW = 24
PROMPTS = [list(p) for p in TINY_PROMPTS[:2]]


@pytest.fixture(scope="module")
def greedy(tiny_target: HFTarget) -> list[list[int]]:
    """AR greedy continuation of each prompt (longer than MAX_NEW: the oracle drafts past it)."""
    return [ar_tokens(tiny_target, p, max_new_tokens=MAX_NEW + 8) for p in PROMPTS]


def drafters(
    target: HFTarget, prompt: list[int], greedy: list[int], corrupt_every: int
) -> dict[str, object]:
    vocab = target.vocab_size
    return {
        "pld": PLDDrafter(vocab_size=vocab),
        "oracle_chain": OracleDrafter(greedy, len(prompt), 6, corrupt_every, 1, vocab),
        "oracle_tree": OracleDrafter(greedy, len(prompt), 4, corrupt_every, 2, vocab),
    }


def realized_mismatches(
    target: HFTarget, prompt: list[int], result: GenerationResult
) -> list[float]:
    """Regret of every generated token that is not the argmax under its realized prefix."""
    logits = target.full_logits(prompt + result.tokens)[len(prompt) - 1 : -1]
    tokens = torch.tensor(result.tokens)
    drafted = logits.gather(-1, tokens[:, None])[:, 0]
    regret = logits.max(-1).values - drafted
    return regret[logits.argmax(-1) != tokens].tolist()


@pytest.mark.parametrize("settings", [{"budget": 0}, {"gate": 0}, {"cap": 0}])
def test_zero_setting_matches_strict_greedy(settings, tiny_target, greedy):
    verifier = ASDVerifier(**{"budget": 50.0, "gate": 8.0, "cap": 2, **settings})
    for prompt, cont in zip(PROMPTS, greedy, strict=True):
        for name, drafter in drafters(tiny_target, prompt, cont, corrupt_every=3).items():
            result = run_generate(tiny_target, drafter, prompt, MAX_NEW, verifier=verifier)
            assert result.tokens == cont[:MAX_NEW], f"{name} on {bytes(prompt)!r}"
            assert all(s.n_relaxed == 0 and s.regret == 0.0 for s in result.steps)


@pytest.mark.parametrize(
    "settings",
    [
        {"budget": 30.0, "gate": 8.0, "cap": 2},
        {"budget": 12.0, "gate": 4.0, "cap": 1, "suffix_values": "normalized"},
        {"budget": 12.0, "gate": 8.0, "cap": 2, "reproduction_strict": True},
    ],
)
def test_relaxed_tokens_are_accounted_and_bounded(settings, tiny_target, greedy):
    verifier = ASDVerifier(**settings)
    total_relaxed = 0
    for prompt, cont in zip(PROMPTS, greedy, strict=True):
        for name, drafter in drafters(tiny_target, prompt, cont, corrupt_every=2).items():
            result = run_generate(tiny_target, drafter, prompt, MAX_NEW, verifier=verifier)
            steps = result.steps
            relaxed = sum(s.n_relaxed for s in steps)
            spent = sum(s.regret for s in steps)
            assert spent <= verifier.budget + 1e-6, name  # the ledger is per request
            assert all(s.n_relaxed <= verifier.cap for s in steps)
            assert all(s.n_relaxed <= s.n_accepted for s in steps[:-1])
            seen = realized_mismatches(tiny_target, prompt, result)
            # the last step may have been cut by max_new_tokens after a relaxed token
            assert len(seen) <= relaxed <= len(seen) + steps[-1].n_relaxed, name
            if relaxed == len(seen):
                assert sum(seen) == pytest.approx(spent, abs=1e-6), name
            total_relaxed += relaxed
    assert total_relaxed > 0  # the settings really let ASD relax something


def test_same_verifier_reused_across_requests(tiny_target, greedy):
    """reset() at each request: a second identical request gives identical tokens and spend."""
    verifier = ASDVerifier(budget=10.0, gate=8.0, cap=2)
    prompt = PROMPTS[0]
    drafter = OracleDrafter(greedy[0], len(prompt), 6, 2, 1, tiny_target.vocab_size)
    runs = [run_generate(tiny_target, drafter, prompt, MAX_NEW, verifier=verifier) for _ in "ab"]
    assert runs[0].tokens == runs[1].tokens
    spends = [sum(s.regret for s in r.steps) for r in runs]
    assert spends[0] == spends[1] > 0
