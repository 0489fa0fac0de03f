"""Lossless speculative sampling: the shared logits warper and :class:`SamplingVerifier`.

:func:`warp_logits` is the one place where temperature / top-k / top-p are applied, so the
autoregressive baseline (which samples through ``verify(Draft.empty(), ...)``) and every
speculative method draw from exactly the same distribution ``p``.

Tree verification follows multi-draft speculative sampling / recursive rejection sampling
(SpecInfer; EAGLE-2 ``evaluate_posterior`` with sampling; reference notes section 8.3, variant 3):
walk down from the root; at the current node, with ``p`` the warped target distribution there,

* children that carry a draft distribution ``q_j`` (``draft.q[j]``) are tried first, in node
  order: accept child ``x`` with probability ``min(1, p(x) / q_j(x))``; on rejection
  ``p <- normalize(max(p - q_j, 0))`` and the next sibling is tried;
* then one token ``y ~ p`` (the residual, if q-children were rejected) is drawn; if a point-mass
  child has token ``y`` the walk descends into it, otherwise ``y`` is the bonus and the walk ends.
  For a node whose children are all point-mass this is exactly "sample from the target, descend
  on a match" (transformers' model-free rule), and it equals sequential rejection of one-hot
  drafts.

Every round is a valid rejection sampler for the current residual, so the emitted token has
distribution ``p``; point-mass proposals are not random, so handling them last keeps this true.
Exactness with ``q`` needs ``q[j]`` to be the distribution node ``j``'s token was actually drawn
from, given the tokens of the siblings before it (i.i.d. sibling drafts: equal rows). Duplicate
tokens: a repeated q-child is not tested (its residual mass is zero, so it would be rejected) but
its residual update is still applied -- skipping it entirely would bias i.i.d. drafts, which the
statistical tests detect; among point-mass duplicates the first child wins. Mixed trees: a row
of ``draft.q`` that contains NaN (by convention the whole row, ``torch.full((V,), nan)``) marks
a point-mass node.

Randomness: one uniform from ``rng`` per emitted token's draw (inverse CDF) plus one per tested
q-child. With point-mass drafts every emitted token therefore consumes exactly the uniform the
autoregressive baseline would use for it, so for the same seed speculative sampling reproduces
the baseline's output token for token (up to logit rounding between tree and sequential
forwards) -- a coupling the tests use, on top of the distributional checks.

Temperature 0 reduces to strict greedy verification
(:func:`racer_bench.engine.verify.greedy.greedy_accept`) and ignores ``q``. All randomness comes
from
the ``rng`` argument; the global RNG is never used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, ClassVar

import torch
from annotated_types import Interval

from racer_bench.config.schema import NonNegativeFloat, NonNegativeInt
from racer_bench.engine.structs import Draft, VerifyResult
from racer_bench.engine.verify.greedy import greedy_accept


def warp_logits(
    logits: torch.Tensor, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0
) -> torch.Tensor:
    """Apply temperature, then top-k, then top-p (transformers' warper order).

    Args:
        logits: FloatTensor[..., V] raw logits.
        temperature: divides the logits; 0 keeps only the (first) argmax (greedy).
        top_k: keep the ``top_k`` largest logits (ties at the k-th value are kept); 0 = off.
        top_p: keep the smallest set of most likely tokens whose mass reaches ``top_p``
            (at least one token); 1.0 = off.

    Returns:
        FloatTensor[..., V] (at least float32) with removed tokens set to ``-inf``.
    """
    _check_warp_args(temperature, top_k, top_p)
    if logits.dtype not in (torch.float32, torch.float64):
        logits = logits.float()
    if temperature == 0:
        keep = torch.zeros_like(logits, dtype=torch.bool)
        keep.scatter_(-1, logits.argmax(-1, keepdim=True), True)
        return logits.masked_fill(~keep, float("-inf"))
    if temperature != 1.0:
        logits = logits / temperature
    if 0 < top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        drop_sorted = cum <= 1.0 - top_p
        drop_sorted[..., -1] = False  # always keep the most likely token
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def _check_warp_args(temperature: float, top_k: int, top_p: float) -> None:
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if top_k < 0:
        raise ValueError(f"top_k must be >= 0 (0 = off), got {top_k}")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")


def uniform(rng: torch.Generator) -> float:
    """One U[0, 1) draw from ``rng`` (float64, on the generator's own device)."""
    return torch.rand((), generator=rng, device=rng.device, dtype=torch.float64).item()


def inverse_cdf(probs: torch.Tensor, u: float) -> int:
    """Token at quantile ``u`` of FloatTensor[V] ``probs`` (need not sum to 1)."""
    cdf = probs.cumsum(-1, dtype=torch.float64)
    # right=True returns the first index whose cdf exceeds u * total: never a zero-mass token.
    index = int(torch.searchsorted(cdf, cdf[-1] * u, right=True).item())
    return min(index, probs.shape[-1] - 1)


def sample_token(probs: torch.Tensor, rng: torch.Generator) -> int:
    """One draw from FloatTensor[V] ``probs``; a CPU ``rng`` may drive GPU ``probs``."""
    return inverse_cdf(probs, uniform(rng))


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """``normalize(max(p - q, 0))`` for FloatTensor[V] rows; ``p`` itself if that is all zero.

    The zero case only arises from rounding (a rejection is impossible when ``p <= q``
    everywhere, i.e. ``p == q``), so keeping ``p`` is the natural fallback.
    """
    r = (p - q).clamp_min(0)
    total = r.sum()
    return r / total if total.item() > 0 else p


def child_lists(parents: Sequence[int]) -> list[list[int]]:
    """``out[i + 1]`` = children of node ``i`` in node order (``out[0]`` = root's children)."""
    out: list[list[int]] = [[] for _ in range(len(parents) + 1)]
    for j, p in enumerate(parents):
        out[p + 1].append(j)
    return out


def point_mass_flags(draft: Draft) -> list[bool]:
    """True for nodes without a draft distribution (no ``q``, or a NaN row in ``q``)."""
    if draft.q is None:
        return [True] * len(draft)
    return torch.isnan(draft.q).any(dim=-1).tolist()


def choose_child(
    p: torch.Tensor,
    children: Sequence[int],
    tokens: Sequence[int],
    point_mass: Sequence[bool],
    q: torch.Tensor | None,
    rng: torch.Generator,
) -> tuple[int, int]:
    """One level of recursive rejection sampling below the current node.

    Args:
        p: FloatTensor[V] warped target probabilities at the current node.
        children: node indices of the current node's children, in node order.
        tokens, point_mass: per-node token ids and point-mass flags (length N).
        q: FloatTensor[N, V] or None, draft distributions (same device and dtype as ``p``).
        rng: the only source of randomness (one draw per q-child tested, one for the token).

    Returns:
        (accepted child or -1, its token or the bonus token sampled from the residual).
    """
    tried: set[int] = set()
    by_token: dict[int, int] = {}
    for j in children:
        t = tokens[j]
        if point_mass[j]:
            by_token.setdefault(t, j)  # duplicate point-mass siblings: the first one wins
            continue
        q_j = q[j]  # type: ignore[index]
        # A repeated token has zero residual mass, so its test would surely reject; the residual
        # update must still happen: skipping it would bias i.i.d. (with-replacement) drafts.
        if t not in tried:
            tried.add(t)
            # u * q(x) < p(x)  <=>  u < p(x) / q(x), without dividing by a possible zero.
            if uniform(rng) * q_j[t].item() < p[t].item():
                return j, t
        p = residual(p, q_j)
    y = sample_token(p, rng)
    return by_token.get(y, -1), y


class SamplingVerifier:
    """Lossless speculative sampling over draft trees (see the module docstring)."""

    name: ClassVar[str] = "sampling"
    lossless: ClassVar[bool] = True

    def __init__(
        self,
        temperature: NonNegativeFloat = 1.0,
        top_p: Annotated[float, Interval(gt=0, le=1)] = 1.0,
        top_k: NonNegativeInt = 0,
    ) -> None:
        _check_warp_args(temperature, top_k, top_p)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.top_k = int(top_k)

    def reset(self) -> None:
        pass

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """Warped target distribution FloatTensor[..., V] (float64) from raw logits."""
        warped = warp_logits(logits, self.temperature, self.top_k, self.top_p)
        return warped.softmax(-1, dtype=torch.float64)

    def verify(self, draft: Draft, logits: torch.Tensor, rng: torch.Generator) -> VerifyResult:
        tokens = draft.tokens.tolist()
        parents = draft.parents.tolist()
        if self.temperature == 0:
            accepted, bonus = greedy_accept(tokens, parents, logits.argmax(-1).tolist())
            return VerifyResult(accepted=accepted, bonus=bonus)
        children = child_lists(parents)
        point_mass = point_mass_flags(draft)
        q = None if draft.q is None else draft.q.to(logits.device, torch.float64)
        accepted: list[int] = []
        node = -1
        while True:
            p = self.probs(logits[node + 1])
            child, token = choose_child(p, children[node + 1], tokens, point_mass, q, rng)
            if child < 0:
                return VerifyResult(accepted=accepted, bonus=token)
            accepted.append(child)
            node = child
