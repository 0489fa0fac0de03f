"""Plain data types shared by the decode loop, drafters, verifiers and metrics.

Glossary (fixed across the code base):
    root   -- the last committed token; the target has not consumed it yet (its KV is not cached).
    node   -- one speculative token of a draft tree; node ``i`` has parent ``parents[i]``
              (``-1`` = child of the root) and the order is topological (``parents[i] < i``).
    step   -- one target verification forward.
    bonus  -- the target's own token after the last accepted node.
    MAT    -- mean accepted tokens per step, bonus included (AR = 1).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import IntEnum

import torch


class Source(IntEnum):
    """Provenance of a draft node; makes retrieval hit rate a generic metric."""

    OTHER = 0
    RETRIEVAL = 1  # copied from the context or a datastore (PLD, REST, RACER automaton)
    LOGITS = 2  # from remembered target logits (RACER logits tree, Token Recycling)
    MODEL = 3  # from a draft model or head (SpS, Medusa, EAGLE)
    NEXT_NEXT = 4  # LogitSpec next-next-token guess from the last logits


@dataclass
class AuxBranch:
    """Extra tokens that ride along in the verification forward but are never accepted.

    Lookahead's Jacobi window is the example: the loop forwards them with the draft and hands
    their logits' top-1 back to the drafter, then drops their KV.

    Attributes:
        tokens: LongTensor[A] token ids.
        depths: LongTensor[A] position offset from the root (root = 0), so position ids are
            ``root_position + depths``.
        mask: BoolTensor[A, A] -- ``mask[i, j]`` means aux token ``i`` attends to aux token ``j``
            (the diagonal must be set). Every aux token attends to the root and the cached prefix,
            never to draft nodes.
    """

    tokens: torch.Tensor
    depths: torch.Tensor
    mask: torch.Tensor

    def __len__(self) -> int:
        return int(self.tokens.numel())


@dataclass
class Draft:
    """A draft tree below the root.

    Attributes:
        tokens: LongTensor[N] node token ids (root excluded).
        parents: LongTensor[N] parent node index, ``-1`` for children of the root, topological.
        source: IntTensor[N] or None -- a :class:`Source` per node.
        q: FloatTensor[N, V] or None -- draft distribution that proposed each node's token
            (``q[i]`` is the distribution the node was drawn from); None = point-mass draft.
        meta: per-step drafter counters (e.g. ``retrieval_found``), averaged into the summary.
        aux: optional :class:`AuxBranch` forwarded with the tree.
        rank: LongTensor[N] or None -- rank of each node inside the top-k list it came from
            (RACER's copy-logit vs last-logit analysis); -1 where not applicable.
        score: FloatTensor[N] or None -- the drafter's own confidence feature per node, higher
            meaning more likely accepted (a match length, an n-gram count, a head's
            probability); NaN where the drafter has none. Used by the confidence scheduler to
            bucket acceptance statistics; never by verifiers.
        score_is_probability: the scores are the drafter's own estimates of P(node accepted |
            parent accepted) (RACER, DSpark); the confidence scheduler then backs each node's
            estimate off to its score rather than to coarser buckets (``scheduler.score_prior``).
    """

    tokens: torch.Tensor
    parents: torch.Tensor
    source: torch.Tensor | None = None
    q: torch.Tensor | None = None
    meta: dict[str, float] = field(default_factory=dict)
    aux: AuxBranch | None = None
    rank: torch.Tensor | None = None
    score: torch.Tensor | None = None
    score_is_probability: bool = False

    @staticmethod
    def empty() -> Draft:
        """The explicit "no draft": the step is a plain autoregressive step."""
        return Draft(
            tokens=torch.zeros(0, dtype=torch.long), parents=torch.zeros(0, dtype=torch.long)
        )

    @staticmethod
    def chain(tokens: list[int], source: Source = Source.OTHER) -> Draft:
        """A single chain ``tokens[0] -> tokens[1] -> ...`` below the root."""
        n = len(tokens)
        return Draft(
            tokens=torch.tensor(tokens, dtype=torch.long),
            parents=torch.arange(-1, n - 1, dtype=torch.long),
            source=torch.full((n,), int(source), dtype=torch.int32),
        )

    def __len__(self) -> int:
        return int(self.tokens.numel())


@dataclass
class DraftContext:
    """What :meth:`Drafter.propose` sees.

    Attributes:
        tokens: committed sequence (prompt + generated, root included) as a Python list;
            read-only by convention.
        root: the last committed token (``tokens[-1]``), not yet consumed by the target.
        budget: maximum number of draft nodes (root excluded).
        max_depth: maximum node depth (root = 0); beyond it tokens could never be committed.
        root_topk: LongTensor[k] or None -- target top-k at the position that produced the root
            (the "last logits"), when the drafter declared ``needs.topk``.
        hidden: FloatTensor[L, F] or None -- the prompt's target features (one row per prompt
            token), on the first step only, when the drafter declared ``needs.hidden_states``.
    """

    tokens: list[int]
    root: int
    budget: int
    max_depth: int
    root_topk: torch.Tensor | None = None
    hidden: torch.Tensor | None = None


@dataclass
class VerifyResult:
    """A verifier's decision for one step.

    Attributes:
        accepted: node indices from the root's child down to the last accepted node.
        bonus: the token emitted after the last accepted node.
        n_relaxed: accepted nodes that were *not* the target's choice (ASD exceptions).
        regret: regret spent on those nodes (ASD ledger units).
    """

    accepted: list[int]
    bonus: int
    n_relaxed: int = 0
    regret: float = 0.0


@dataclass
class Feedback:
    """What :meth:`Drafter.update` sees after a step.

    Attributes:
        draft: the proposed draft.
        accepted: accepted node indices (root to leaf order).
        committed: tokens appended to the output this step (accepted tokens + bonus).
        node_topk: LongTensor[N+1, k] or None -- target top-k after the root (row 0) and after
            every node ``i`` (row ``i+1``), when the drafter declared ``needs.topk``.
        aux_argmax: LongTensor[A] or None -- target argmax after each aux token.
        hidden: FloatTensor[N+1, F] or None -- target features of the root (row 0) and of every
            node (row ``i+1``), when the drafter declared ``needs.hidden_states``.
    """

    draft: Draft
    accepted: list[int]
    committed: list[int]
    node_topk: torch.Tensor | None = None
    aux_argmax: torch.Tensor | None = None
    hidden: torch.Tensor | None = None


@dataclass
class StepRecord:
    """Counters of one step; the unit every metric is built from.

    Scheduler fields: ``n_candidates`` = nodes the drafter proposed (``n_draft`` = nodes
    verified); ``predicted_accepted`` = the scheduler's expected accepted draft tokens;
    ``cost`` = the profile's cost of the forward; ``calibration`` = (predicted survival,
    accepted before any EOS/length cut) per verified node. None/empty without predictions.
    """

    n_draft: int
    depth: int
    n_accepted: int  # accepted draft nodes (bonus excluded); may be cut by EOS/stop/length
    n_committed: int  # tokens appended to the output by this step (accepted + bonus, after cuts)
    accepted_sources: list[int]  # Source label of each accepted node, root first (after cuts)
    has_retrieval: bool
    t_draft: float
    t_verify: float
    t_update: float
    n_relaxed: int = 0
    regret: float = 0.0
    accepted_ranks: list[int] = field(default_factory=list)
    meta: dict[str, float] = field(default_factory=dict)
    n_candidates: int | None = None
    predicted_accepted: float | None = None
    cost: float | None = None
    calibration: list[tuple[float, int]] = field(default_factory=list)

    @property
    def accepted_by_source(self) -> dict[int, int]:
        """Accepted nodes per Source label."""
        return dict(Counter(self.accepted_sources))

    def cut_accepted(self, n_keep: int) -> None:
        """Keep the accepted nodes among the first ``n_keep`` committed tokens (an EOS, stop
        string or length cut), so per-source counts never exceed ``n_accepted``."""
        self.n_accepted = min(self.n_accepted, n_keep)
        self.accepted_sources = self.accepted_sources[: self.n_accepted]


@dataclass
class GenerationResult:
    """One generation call (one turn of one prompt) by one method.

    ``tokens`` holds only new tokens; timings are seconds.
    """

    tokens: list[int]
    text: str
    prefill_time: float
    decode_time: float
    steps: list[StepRecord]
    stop_reason: str  # "eos" | "length" | "stop" | "context"

    @property
    def wall_time(self) -> float:
        return self.prefill_time + self.decode_time
