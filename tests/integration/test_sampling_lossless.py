"""Speculative sampling on the tiny model draws the first tokens from the AR distribution.

Two checks. (1) Point-mass drafts (oracle tree, PLD, a top-2 tree that peeks at the target)
consume exactly the uniforms AR sampling consumes, so with the same seed they must reproduce AR
sampling token for token -- the strongest form of "same distribution". (2) For all drafters,
q-bearing ones included, the distribution of the first tokens is tested against the exact one.

The reference is exact, not another sample: the first ``DEPTH`` tokens are mapped to a
"pattern" -- the tokens while each is among the top-``K`` of its position, then ``*`` at the
first one that is not -- and each pattern's probability under AR sampling is computed from
``1 + K + K^2`` fresh forwards of the target. A chi-square goodness-of-fit test (cells with an
expected count below 5 pooled, level 0.001 via the Wilson-Hilferty quantile) then compares
``N_GEN`` generations per drafter with it; the seeds are fixed, so the test is deterministic.

The random tiny model does not repeat itself, so the prompt is built to give PLD something to
copy: the model's own greedy continuation is spliced into the middle of a prompt until the
spliced prompt's greedy continuation starts with a bigram it already contains.
"""

from __future__ import annotations

import math
from collections import Counter

import pytest
import torch

from methods.dspark import DSparkDrafter
from methods.dspark.head import dspark_loss
from methods.pld import PLDDrafter
from racer_bench.engine.drafter import DrafterNeeds, NullDrafter
from racer_bench.engine.structs import Draft, DraftContext, Feedback
from racer_bench.engine.target import HFTarget, features
from racer_bench.engine.tree import prune
from racer_bench.engine.verify.sampling import SamplingVerifier
from tests.conftest import ar_tokens, run_generate
from tests.helpers import OracleDrafter, copyable_prompt

DEPTH = 3  # generated tokens compared
K = 2  # top-k tokens per position kept as separate cells
N_GEN = 300  # generations per drafter
TEMPERATURE = 0.6
Z_001 = 3.0902  # standard normal quantile of 1 - 0.001


@pytest.fixture(scope="module")
def prompt(tiny_target: HFTarget) -> list[int]:
    return copyable_prompt(tiny_target)


@pytest.fixture(scope="module")
def reference(
    tiny_target: HFTarget, prompt: list[int]
) -> tuple[dict[tuple, float], dict[tuple, list[int]]]:
    return pattern_probs(tiny_target, SamplingVerifier(temperature=TEMPERATURE), prompt)


def pattern_probs(
    target: HFTarget, verifier: SamplingVerifier, prompt: list[int]
) -> tuple[dict[tuple, float], dict[tuple, list[int]]]:
    """Exact pattern probabilities under AR sampling, and the top-K list after each prefix."""
    probs: dict[tuple, float] = {}
    tops: dict[tuple, list[int]] = {}

    def expand(prefix: tuple, mass: float) -> None:
        if len(prefix) == DEPTH:
            probs[prefix] = mass
            return
        p = verifier.probs(target.full_logits(prompt + list(prefix))[-1])
        tops[prefix] = p.topk(K).indices.tolist()
        for t in tops[prefix]:
            expand((*prefix, t), mass * float(p[t]))
        probs[(*prefix, "*")] = mass * (1.0 - float(p[tops[prefix]].sum()))

    expand((), 1.0)
    return probs, tops


def pattern(tokens: list[int], tops: dict[tuple, list[int]]) -> tuple:
    prefix: tuple = ()
    for t in tokens[:DEPTH]:
        if t not in tops[prefix]:
            return (*prefix, "*")
        prefix = (*prefix, t)
    return prefix


def chi_square(counts: Counter, probs: dict[tuple, float], n: int) -> tuple[float, float]:
    """(statistic, 0.001 critical value); cells expecting fewer than 5 are pooled."""
    big = [c for c, p in probs.items() if p * n >= 5]
    observed = [counts[c] for c in big] + [n - sum(counts[c] for c in big)]
    expected = [probs[c] * n for c in big] + [n * (1.0 - sum(probs[c] for c in big))]
    stat = sum((o - e) ** 2 / e for o, e in zip(observed, expected, strict=True) if e > 0)
    df = len(observed) - 1
    h = 2.0 / (9.0 * df)
    return stat, df * (1.0 - h + Z_001 * math.sqrt(h)) ** 3


class PeekDrafter:
    """Test drafter that peeks at the target through fresh forwards (never its KV cache).

    ``q_temperature=None``: point-mass tree, the target's top-1 chain with the top-2 token as a
    sibling at every level (accepted often). Otherwise: two i.i.d. children per level drawn
    from ``softmax(logits / q_temperature)`` with their ``q`` rows, the chain continuing under
    the first; drafting randomness comes from the drafter's own generator.
    """

    name = "peek"
    version = "1"
    needs = DrafterNeeds()

    def __init__(self, target: HFTarget, depth: int, q_temperature: float | None = None) -> None:
        self.target, self.depth, self.q_temperature = target, depth, q_temperature
        self.capacity = 2 * depth
        self.gen = torch.Generator().manual_seed(123)

    def reset(self, prompt_ids: list[int], prompt_topk: torch.Tensor | None) -> None:
        pass

    def propose(self, ctx: DraftContext) -> Draft:
        tokens: list[int] = []
        parents: list[int] = []
        q_rows: list[torch.Tensor] = []
        context = list(ctx.tokens)
        for level in range(min(self.depth, ctx.max_depth)):
            logits = self.target.full_logits(context)[-1]
            if self.q_temperature is None:
                pair = logits.topk(2).indices.tolist()
            else:
                q = (logits / self.q_temperature).softmax(-1)
                pair = torch.multinomial(q, 2, replacement=True, generator=self.gen).tolist()
                q_rows += [q, q]
            parents += [2 * level - 2] * 2 if level else [-1, -1]
            tokens += pair
            context.append(pair[0])
        q = torch.stack(q_rows) if q_rows else None
        draft = Draft(torch.tensor(tokens, dtype=torch.long), torch.tensor(parents), q=q)
        return prune(draft, ctx.budget, ctx.max_depth)

    def update(self, fb: Feedback) -> None:
        pass


def fitted_dspark(target: HFTarget, prompt: list[int]) -> DSparkDrafter:
    """A DSpark drafter (sampled tree: 2 i.i.d. chains with q rows) whose head was fitted to the
    target's samples after ``prompt``, so that its q overlaps p and drafts get accepted (a
    random head's q almost never does on the tiny model)."""
    # engine=eager keeps plain nn.Linear layers, which the fit below trains
    drafter = DSparkDrafter(
        target.vocab_size, temperature=1.0, topk=2, total_tokens=6, engine="eager"
    )
    verifier = SamplingVerifier(temperature=TEMPERATURE)
    seqs = [prompt + ar_tokens(target, prompt, max_new_tokens=DEPTH, verifier=verifier,
                               seed=10_000 + s) for s in range(24)]  # fmt: skip
    layers = drafter.needs.hidden_layers
    feats = []
    with torch.no_grad():
        for seq in seqs:
            out = target.body(input_ids=torch.tensor([seq]), output_hidden_states=True)
            feats.append(features(out, layers).float())
    head = drafter._random_head(feats[0].shape[-1]).train().requires_grad_(True)
    drafter.head = head
    opt = torch.optim.Adam([p for p in head.parameters() if p.requires_grad], lr=1e-2)
    roots = torch.tensor([len(prompt) - 1, len(prompt)])
    for step in range(120):
        i = step % len(seqs)
        ids = torch.tensor(seqs[i])
        loss, _ = dspark_loss(head, feats[i], ids, ids, roots)
        opt.zero_grad()
        loss.backward()
        opt.step()
    head.eval().requires_grad_(False)
    return drafter


def make_drafter(name: str, target: HFTarget, prompt: list[int]) -> object:
    if name == "ar":
        return NullDrafter()
    if name == "pld":
        return PLDDrafter(vocab_size=target.vocab_size, num_pred_tokens=4)
    if name == "peek_tree":
        return PeekDrafter(target, depth=DEPTH)
    if name == "peek_q":
        return PeekDrafter(target, depth=2, q_temperature=1.5)
    if name == "dspark_q":
        return fitted_dspark(target, prompt)
    greedy = ar_tokens(target, prompt, max_new_tokens=DEPTH + 2)  # wrong siblings at every level
    return OracleDrafter(greedy, len(prompt), depth=DEPTH, width=2, vocab_size=target.vocab_size)


@pytest.mark.parametrize("name", ["ar", "pld", "peek_q", "dspark_q"])
def test_first_tokens_match_ar_sampling(name, tiny_target, prompt, reference):
    """Chi-square goodness of fit of the first DEPTH tokens against exact AR sampling.

    The oracle tree is left to the identity test below, which implies this one for it.
    """
    verifier = SamplingVerifier(temperature=TEMPERATURE)
    probs, tops = reference
    drafter = make_drafter(name, tiny_target, prompt)
    counts: Counter = Counter()
    accepted = 0
    for seed in range(N_GEN):
        result = run_generate(
            tiny_target, drafter, prompt, max_new_tokens=DEPTH, verifier=verifier, seed=seed
        )
        assert len(result.tokens) == DEPTH
        counts[pattern(result.tokens, tops)] += 1
        accepted += sum(step.n_accepted for step in result.steps)
    stat, critical = chi_square(counts, probs, N_GEN)
    assert stat < critical, f"{name}: chi2={stat:.1f} >= {critical:.1f}"
    if name != "ar":  # the speculative path was really exercised
        assert accepted >= N_GEN // 10


@pytest.mark.parametrize(
    "warp", [{"temperature": 0.6}, {"temperature": 1.0, "top_k": 20, "top_p": 0.9}]
)
def test_point_mass_drafts_reproduce_ar_samples(warp, tiny_target, prompt):
    """Same seed, same tokens: point-mass drafts consume the uniforms AR sampling would."""
    verifier = SamplingVerifier(**warp)
    accepted = 0
    for name in ("oracle_tree", "pld", "peek_tree"):
        drafter = make_drafter(name, tiny_target, prompt)
        for seed in range(3):
            kwargs = {"max_new_tokens": 16, "verifier": verifier, "seed": seed}
            got = run_generate(tiny_target, drafter, prompt, **kwargs)
            assert got.tokens == ar_tokens(tiny_target, prompt, **kwargs), f"{name}, seed {seed}"
            accepted += sum(step.n_accepted for step in got.steps)
    assert accepted >= 10
