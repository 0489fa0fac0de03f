"""SamplingVerifier and warp_logits: exact in distribution on a 5-token toy target.

The toy target is a Markov chain: the logits after token ``t`` are ``TARGET[t]``, so the logits
of a draft node depend only on its token and a small loop (:func:`emit`) can verify drafts step
after step exactly like ``racer_bench.engine.decode.generate`` does.

Tolerance: with ``N_CALLS`` = 8000 samples the total variation between the empirical and the
true distribution averages ~0.007 (first token, 5 outcomes) and ~0.018 (first two tokens, 25
outcomes); in 20k simulated multinomial draws its 99.99% quantile was 0.021 and 0.031. So
``TOL1`` = 0.025 and ``TOL2`` = 0.04 leave a false-alarm rate far below 1e-4 (and the seed is
fixed anyway), while the bugs this guards against shift the distribution much more: computing
rejections from ``p`` instead of the residual gives 0.2-0.3, skipping the residual update of
duplicate i.i.d. siblings gives ~0.05, copying drafts blindly gives TV(q, p) > 0.3.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable
from itertools import accumulate

import pytest
import torch
from hydra.utils import instantiate

import racer_bench.engine.verify.sampling as sampling
from racer_bench.engine.structs import Draft
from racer_bench.engine.verify.greedy import GreedyVerifier
from racer_bench.engine.verify.sampling import SamplingVerifier, sample_token, warp_logits

V = 5
N_CALLS = 8000
TOL1 = 0.025  # first emitted token (5 outcomes)
TOL2 = 0.04  # first two emitted tokens (25 outcomes)
TARGET = torch.tensor(
    [
        [2.0, 1.0, 0.5, 0.0, -1.0],
        [0.0, 1.5, -0.5, 1.0, 0.3],
        [1.0, 1.0, 2.0, -1.0, 0.0],
        [-0.5, 0.0, 0.5, 1.0, 1.5],
        [0.3, -0.2, 1.2, 0.8, 0.0],
    ],
    dtype=torch.float64,
)
# Draft "model": a different Markov chain, far enough from the target that copying its samples
# (or mishandling rejections) moves the output distribution well beyond the tolerances.
DRAFT_Q = torch.tensor(
    [
        [0.05, 0.15, 0.5, 0.2, 0.1],
        [0.4, 0.1, 0.3, 0.1, 0.1],
        [0.2, 0.5, 0.1, 0.1, 0.1],
        [0.5, 0.2, 0.1, 0.1, 0.1],
        [0.1, 0.1, 0.1, 0.1, 0.6],
    ],
    dtype=torch.float64,
)
PM = V  # row index of the all-NaN "point mass" row in Q_OR_NAN
Q_OR_NAN = torch.cat([DRAFT_Q, torch.full((1, V), float("nan"), dtype=torch.float64)])
Q_CUM = [list(accumulate(row)) for row in DRAFT_Q.tolist()]
GREEDY = TARGET.argmax(-1).tolist()
ROOT = 0
Proposer = Callable[[int, random.Random], Draft]


def tree(tokens: list[int], parents: list[int], q_rows: list[int] | None = None) -> Draft:
    """A draft whose node ``j`` was drawn from ``Q_OR_NAN[q_rows[j]]`` (PM = point mass)."""
    return Draft(
        tokens=torch.tensor(tokens),
        parents=torch.tensor(parents),
        q=None if q_rows is None else Q_OR_NAN[q_rows],
    )


def draw(prev: int, g: random.Random) -> int:
    """A token from the draft model after ``prev`` (Python RNG: drafting stays cheap)."""
    cum = Q_CUM[prev]
    return min(bisect_right(cum, g.random() * cum[-1]), V - 1)


def chain_pm(root: int, g: random.Random) -> Draft:
    """Point-mass chain: the target's greedy continuation (often accepted)."""
    a = GREEDY[root]
    return tree([a, GREEDY[a]], [-1, 0])


def tree_pm(root: int, g: random.Random) -> Draft:
    """Point-mass two-level tree with a duplicate sibling and a wrong branch."""
    return tree([(root + 1) % V, root, (root + 1) % V, 2, 4, 1], [-1, -1, -1, 0, 0, 1])


def chain_q(root: int, g: random.Random) -> Draft:
    """Chain sampled from the draft model, with its distributions."""
    x1 = draw(root, g)
    return tree([x1, draw(x1, g)], [-1, 0], [root, x1])


def tree_q(root: int, g: random.Random) -> Draft:
    """Three i.i.d. children of the root (duplicates possible), two i.i.d. children each."""
    top = [draw(root, g) for _ in range(3)]
    tokens = top + [draw(x, g) for x in top for _ in range(2)]
    return tree(tokens, [-1, -1, -1, 0, 0, 1, 1, 2, 2], [root] * 3 + [x for x in top for _ in "ab"])


def tree_mixed(root: int, g: random.Random) -> Draft:
    """q-children and point-mass children (NaN rows) on both levels."""
    x1, x2 = draw(root, g), draw(root, g)
    tokens = [3, x1, x2, 0, draw(x1, g), 2]
    return tree(tokens, [-1, -1, -1, 1, 1, 0], [PM, root, root, PM, x1, PM])


def emit(verifier: SamplingVerifier, propose: Proposer, n: int, rng, draft_rng) -> list[int]:
    """First ``n`` tokens after ``ROOT``, verifying drafts step by step like the decode loop."""
    out: list[int] = []
    root = ROOT
    while len(out) < n:
        draft = propose(root, draft_rng)
        tokens = draft.tokens.tolist()
        res = verifier.verify(draft, TARGET[[root, *tokens]], rng)
        out += [tokens[i] for i in res.accepted] + [res.bonus]
        root = out[-1]
    return out[:n]


def empirical(
    verifier: SamplingVerifier, propose: Proposer, n: int, calls: int = N_CALLS
) -> dict[tuple, float]:
    """Empirical distribution of the first ``n`` emitted tokens over ``calls`` runs."""
    rng, draft_rng = torch.Generator().manual_seed(1), random.Random(2)
    counts = Counter(tuple(emit(verifier, propose, n, rng, draft_rng)) for _ in range(calls))
    return {k: c / calls for k, c in counts.items()}


def exact(verifier: SamplingVerifier, n: int) -> dict[tuple, float]:
    """True distribution of the first ``n`` tokens under the warped target."""
    p = verifier.probs(TARGET)
    dist: dict[tuple, float] = {(): 1.0}
    for _ in range(n):
        last = lambda s: s[-1] if s else ROOT  # noqa: E731
        dist = {(*s, y): w * float(p[last(s), y]) for s, w in dist.items() for y in range(V)}
    return dist


def tv(a: dict[tuple, float], b: dict[tuple, float]) -> float:
    return 0.5 * sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in a.keys() | b.keys())


@pytest.mark.parametrize(
    ("propose", "n", "tol", "warp"),
    [
        (chain_pm, 2, TOL2, {}),
        (tree_pm, 1, TOL1, {"temperature": 0.7, "top_k": 3}),
        (chain_q, 2, TOL2, {}),
        (tree_q, 1, TOL1, {}),
        (tree_mixed, 1, TOL1, {"temperature": 1.3, "top_p": 0.9}),
    ],
    ids=["chain_pm", "tree_pm_T0.7_k3", "chain_q", "tree_q", "mixed_T1.3_p0.9"],
)
def test_emitted_tokens_follow_target(propose, n, tol, warp):
    verifier = SamplingVerifier(**warp)
    assert tv(empirical(verifier, propose, n), exact(verifier, n)) < tol


def test_drafts_differ_from_target_enough_to_matter():
    """Copying drafts blindly would fail the tolerance: the test above has power."""
    p = SamplingVerifier().probs(TARGET[ROOT])
    assert 0.5 * (DRAFT_Q[ROOT] - p).abs().sum().item() > 5 * TOL1


def test_missing_residual_is_detected(monkeypatch):
    """Sampling rejections from p instead of the residual is biased, and the test sees it."""
    monkeypatch.setattr(sampling, "residual", lambda p, q: p)
    verifier = SamplingVerifier()
    assert tv(empirical(verifier, tree_q, 1, calls=2000), exact(verifier, 1)) > 4 * TOL1


def test_point_mass_walk_accepts_and_descends():
    """A deterministic target (one-hot probabilities) accepts exactly the matching path."""
    logits = torch.full((7, V), -1e9, dtype=torch.float64)
    for row, tok in enumerate([1, 0, 3, 0, 2, 4, 0]):  # argmax after root and after each node
        logits[row, tok] = 0.0
    draft = tree([4, 1, 1, 3, 2, 0], [-1, -1, -1, 1, 3, 3])
    res = SamplingVerifier().verify(draft, logits, torch.Generator().manual_seed(0))
    assert res.accepted == [1, 3, 4] and res.bonus == 4


def test_temperature_zero_is_greedy():
    g = torch.Generator().manual_seed(0)
    for seed in range(20):
        logits = torch.randn(7, V, generator=torch.Generator().manual_seed(seed))
        draft = tree([0, 1, 2, 3, 4, 0], [-1, -1, 0, 1, 1, 4])
        got = SamplingVerifier(temperature=0).verify(draft, logits, g)
        want = GreedyVerifier().verify(draft, logits, g)
        assert (got.accepted, got.bonus) == (want.accepted, want.bonus)


def test_only_the_given_generator_is_used():
    """Same seed, same result; the global RNG is neither read nor advanced."""
    logits = TARGET[[0, 1, 2]]
    draft = tree([1, 2], [-1, 0], [0, 1])
    state = torch.get_rng_state()
    runs = []
    for _ in range(2):
        g = torch.Generator().manual_seed(7)
        runs.append([SamplingVerifier().verify(draft, logits, g) for _ in range(50)])
        torch.manual_seed(123)  # perturbing the global RNG must not matter
    assert runs[0] == runs[1]
    torch.set_rng_state(state)


def test_sample_token_never_draws_zero_mass():
    g = torch.Generator().manual_seed(0)
    probs = torch.tensor([0.0, 0.3, 0.0, 0.7, 0.0])
    drawn = {sample_token(probs, g) for _ in range(2000)}
    assert drawn == {1, 3}


def test_warp_logits_temperature_topk_topp():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, 3.0]])
    assert torch.allclose(warp_logits(logits, temperature=2.0), logits / 2)
    top2 = warp_logits(logits, top_k=2)
    assert torch.isfinite(top2).tolist() == [[True, False, False, False, True]]
    probs = logits.softmax(-1)[0]  # sorted: 3.0 (0.64), 2.0 (0.24), 1.0 (0.09), ...
    p_two = float(probs[4] + probs[0])
    kept = lambda top_p: torch.isfinite(warp_logits(logits, top_p=top_p))[0].sum().item()  # noqa: E731
    assert kept(p_two - 0.01) == 2
    assert kept(p_two + 0.01) == 3
    assert kept(0.01) == 1
    greedy = warp_logits(logits, temperature=0)
    assert torch.isfinite(greedy).tolist() == [[False, False, False, False, True]]


@pytest.mark.parametrize("kwargs", [{"temperature": -1}, {"top_p": 0.0}, {"top_k": -2}])
def test_invalid_settings_raise(kwargs):
    with pytest.raises(ValueError):
        SamplingVerifier(**kwargs)


def test_config_instantiates(compose_cfg):
    cfg = compose_cfg("verifier=sampling", "verifier.temperature=0.5", "verifier.top_k=7")
    verifier = instantiate(cfg.verifier)
    assert isinstance(verifier, SamplingVerifier) and verifier.lossless
    assert (verifier.temperature, verifier.top_k, verifier.top_p) == (0.5, 7, 1.0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_logits_with_cpu_generator_match_cpu():
    """The loop's generator lives on the CPU; logits (and q) may live on the GPU."""
    draft = tree([1, 2, 3, 0], [-1, -1, 0, 0], [0, 0, 1, PM])
    logits = TARGET[[0, 1, 2, 3, 0]]
    verifier = SamplingVerifier(temperature=0.9, top_p=0.95)
    results = []
    for device in ("cpu", "cuda"):
        g = torch.Generator().manual_seed(3)
        results.append([verifier.verify(draft, logits.to(device), g) for _ in range(200)])
    assert results[0] == results[1]
