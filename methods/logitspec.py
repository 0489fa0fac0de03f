"""LogitSpec: next-next-token guesses from the last logits, extended by n-gram retrieval.

Paper: Liu et al., "LogitSpec" (arXiv 2507.01449). Reference code: smart-lty/LogitSpec
(``model/logitspec/generate_drafts_util.py``: ``Pool``, ``generate_draft_tokens``). Behaviour
followed:

* Chain A: the continuation of the longest suffix n-gram (N..1) of context + [root], up to
  ``num_pred_tokens`` tokens, under the root (not rank-truncated).
* Next-next guesses: the top-``topk`` of the "last logits" (the target's logits at the position
  that produced the root, ``DraftContext.root_topk``). Entries equal to the root are skipped but
  still consume their rank ("raw rank": under greedy the root is rank 0, so guesses start at
  rank 1). Each guess ``d`` opens a chain ``[d] + lookup(context + [root, d])``, cut to the
  length of its rank band: ranks <= 8 -> 4 tokens, <= 32 -> 3, beyond -> 1
  (``rank_thresholds`` / ``rank_lengths``).
* Capacity: ``draft_tree_capacity`` counts the root, as in the reference (64 -> at most 63 draft
  nodes; ``capacity`` is the node count). A chain that would overflow is cut to the room left
  and filling stops when full.
* Tree: root + independent chains (duplicate prefixes allowed), as in the reference. With
  ``merge_prefixes: true`` chains are merged into a trie instead (our extension), so the same
  node budget holds more distinct guesses.
* The n-gram table is per generation call and updated incrementally from committed tokens
  (:mod:`methods.common.ngram_index`).

Differences from the reference: the table indexes every committed token, the root included (the
reference adds the root one step later; the only effect is that the n-gram before the root
already has it as a continuation); ``topk`` may be set below the capacity to save the target's
top-k cost (null = capacity, the reference); drafts also respect ``ctx.budget``/``max_depth``.
Sources: chain A and retrieved tokens are ``RETRIEVAL``, guesses ``NEXT_NEXT``; ``Draft.rank``
holds each guess's raw rank (-1 elsewhere). ``Draft.score`` says which guess produced a node:
1 / (1 + raw rank of its chain's guess), and 1 for chain A (a continuation of the root itself),
the confidence scheduler's feature.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, ClassVar

import torch
from annotated_types import Ge

from methods.common.ngram_index import NgramIndex
from racer_bench.config.schema import PositiveInt
from racer_bench.engine.drafter import DrafterNeeds
from racer_bench.engine.structs import Draft, DraftContext, Feedback, Source
from racer_bench.engine.tree import TrieBuilder


@dataclass
class Chain:
    """One candidate chain below the root.

    Attributes:
        tokens: the chain's token ids, root child first.
        sources: a :class:`Source` value per token.
        rank: raw rank of the guessed first token, -1 for the next-token (retrieval) chain.
    """

    tokens: list[int]
    sources: list[int]
    rank: int = -1


def chain_score(rank: int) -> float:
    """Score of every node of a chain: 1 for chain A (rank -1), 1 / (1 + rank) for a guess."""
    return 1.0 if rank < 0 else 1.0 / (1.0 + rank)


def length_for_rank(rank: int, thresholds: Sequence[int], lengths: Sequence[int]) -> int:
    """Maximum chain length for a guess of raw rank ``rank`` (first band whose bound >= rank)."""
    for bound, length in zip(thresholds, lengths, strict=False):
        if rank <= bound:
            return length
    return lengths[-1]


def candidate_chains(
    index: NgramIndex,
    context: Sequence[int],
    guesses: Sequence[int],
    max_len: int,
    thresholds: Sequence[int],
    lengths: Sequence[int],
) -> Iterator[Chain]:
    """Chain A, then one chain per next-next guess in rank order (lazily: stop when full).

    Args:
        index: n-gram table over ``context``.
        context: committed tokens, root last.
        guesses: top-k token ids of the last logits, rank order (rank = position).
        max_len: cap on every chain's length (depth limit).
        thresholds: rank band upper bounds, e.g. (8, 32).
        lengths: chain length per band, one more than ``thresholds``, e.g. (4, 3, 1).
    """
    root = context[-1]
    chain_a = list(index.lookup(context)[:max_len])
    if chain_a:
        yield Chain(chain_a, [int(Source.RETRIEVAL)] * len(chain_a))
    for rank, guess in enumerate(guesses):
        if guess == root:
            continue
        limit = min(length_for_rank(rank, thresholds, lengths), max_len)
        if limit <= 0:
            return
        tail = list(index.lookup(context, guess)[: limit - 1]) if limit > 1 else []
        sources = [int(Source.NEXT_NEXT)] + [int(Source.RETRIEVAL)] * len(tail)
        yield Chain([guess, *tail], sources, rank)


def independent_chains(chains: Iterator[Chain], room: int) -> Draft:
    """Root + independent chains (reference layout), cut to ``room`` nodes in total."""
    tokens: list[int] = []
    parents: list[int] = []
    sources: list[int] = []
    ranks: list[int] = []
    scores: list[float] = []
    for chain in chains:
        if len(tokens) >= room:
            break
        take = min(len(chain.tokens), room - len(tokens))
        start = len(tokens)
        tokens += chain.tokens[:take]
        parents += [-1, *range(start, start + take - 1)]
        sources += chain.sources[:take]
        ranks += [chain.rank] + [-1] * (take - 1)
        scores += [chain_score(chain.rank)] * take
    return Draft(
        tokens=torch.tensor(tokens, dtype=torch.long),
        parents=torch.tensor(parents, dtype=torch.long),
        source=torch.tensor(sources, dtype=torch.int32),
        rank=torch.tensor(ranks, dtype=torch.long),
        score=torch.tensor(scores, dtype=torch.float32),
    )


def merged_chains(chains: Iterator[Chain], room: int) -> Draft:
    """The same chains merged into a trie of at most ``room`` nodes.

    A shared node keeps the first inserter's source and rank and its best chain's score.
    """
    builder = TrieBuilder(room)
    for chain in chains:
        if builder.full:
            break
        parent = -1
        for j, (token, source) in enumerate(zip(chain.tokens, chain.sources, strict=True)):
            rank = chain.rank if j == 0 else -1
            parent = builder.add(parent, token, source, rank, chain_score(chain.rank))
            if parent < 0:
                break
    return builder.build()


class LogitSpecDrafter:
    """LogitSpec drafter (root + retrieval chain + next-next-token chains)."""

    name: ClassVar[str] = "logitspec"
    version: ClassVar[str] = "1"
    needs = DrafterNeeds(topk=64, node_topk=False)  # only the last logits are used

    def __init__(
        self,
        vocab_size: int,
        max_ngram_size: PositiveInt = 3,
        num_pred_tokens: PositiveInt = 20,
        draft_tree_capacity: Annotated[int, Ge(2)] = 64,  # counts the root: >= 1 draft node
        topk: PositiveInt | None = None,
        rank_thresholds: Sequence[PositiveInt] = (8, 32),
        rank_lengths: Sequence[PositiveInt] = (4, 3, 1),
        merge_prefixes: bool = False,
    ) -> None:
        if draft_tree_capacity < 1:
            raise ValueError("method.draft_tree_capacity must be >= 1 (it counts the root)")
        if len(rank_lengths) != len(rank_thresholds) + 1 or min(rank_lengths) < 1:
            raise ValueError("method.rank_lengths needs one positive length per band")
        self.max_ngram_size = max_ngram_size
        self.num_pred_tokens = num_pred_tokens
        self.capacity = draft_tree_capacity - 1  # the reference capacity counts the root
        self.thresholds = tuple(int(t) for t in rank_thresholds)
        self.lengths = tuple(int(n) for n in rank_lengths)
        self.merge_prefixes = merge_prefixes
        k = draft_tree_capacity if topk is None else topk
        self.needs = DrafterNeeds(topk=max(1, min(k, vocab_size)), node_topk=False)
        self.index = NgramIndex(max_ngram_size, num_pred_tokens)

    def reset(self, prompt_ids: list[int], prompt_topk: torch.Tensor | None) -> None:
        self.index.build(prompt_ids)

    def _sync(self, tokens: list[int]) -> None:
        """Bring the index in line with the committed tokens (normally a no-op)."""
        known = self.index.tokens
        n = len(known)
        if n == len(tokens) and (n == 0 or known[-1] == tokens[-1]):
            return
        if 0 < n < len(tokens) and known[-1] == tokens[n - 1]:
            self.index.extend(tokens[n:])
        else:
            self.index.build(tokens)

    def propose(self, ctx: DraftContext) -> Draft:
        self._sync(ctx.tokens)
        room = min(self.capacity, ctx.budget)
        if room <= 0 or ctx.max_depth <= 0:
            return Draft.empty()
        guesses = ctx.root_topk.tolist() if ctx.root_topk is not None else []
        chains = candidate_chains(
            self.index,
            ctx.tokens,
            guesses,
            min(self.num_pred_tokens, ctx.max_depth),
            self.thresholds,
            self.lengths,
        )
        build = merged_chains if self.merge_prefixes else independent_chains
        draft = build(chains, room)
        sources = draft.source.tolist()
        draft.meta["retrieval_found"] = float(int(Source.RETRIEVAL) in sources)
        draft.meta["next_token_found"] = float(bool(sources) and draft.rank[0].item() < 0)
        return draft

    def update(self, fb: Feedback) -> None:
        self.index.extend(fb.committed)
