"""RACER: retrieval tree (Aho-Corasick automaton) + copy-logit tree, merged into one draft.

Paper: Zhang, Li, Zhang, Wang, Zhao, "RACER: Retrieval-Augmented Contextual Rapid Speculative
Decoding", Findings of ACL 2026 (arXiv 2604.14885). Reference code: hkr04/RACER @fc494a3
(``racer/automaton/src/automaton.cpp``, ``racer/model/racer_model.py``). Behaviour followed,
per step:

1. Borders: the automaton's states that are suffixes of the context are looked up for a child
   labelled with the root token; those of depth >= ``min_depth`` are borders.
2. Draft tree, by ``selection``:

   * ``reference`` (the paper and its code): the borders' subtrees are searched BFS, keeping
     the ``capacity`` most frequent nodes (``Source.RETRIEVAL``); the remaining budget grows a
     breadth-halving tree from the TokenBin rows (``Source.LOGITS``, ``Draft.rank`` = index in
     the reused top-k row), merged into the same trie: a node already present costs nothing.
   * ``best_first`` (default): one tree from both sources, nodes added in decreasing estimated
     probability of their whole path being accepted (:mod:`methods.racer.best_first`); a
     copied passage goes on past the ``ngram`` window (``extend_windows``). Raw counts favour
     the short matches, which are frequent but spread over many continuations, and breadth
     halving spends a small budget on the root's 8 children (7 of every 8 rarely accepted);
     at capacity 15 this raises MAT on HumanEval completions from 2.88 (``reference`` with
     ``lazy`` links, the better of the two) to 3.56 (docs/benchmarks.md).

3. Update: TokenBin rows for every verified node (accepted or not), the ``ngram`` windows ending
   at the root and at each accepted token, the logits acceptance rates per rank, and
   (``fail_links=lazy``) the automaton state.

``Draft.score`` (both selections) is each node's estimated P(accepted | parent accepted): for a
retrieval node ``count(node) / (count(parent) + retrieval_alpha)`` from the automaton (so a
match seen once scores 1 / 1.1, and a short match spread over many continuations scores low);
for a logits node the running acceptance rate of its row rank at its depth in this generation.

Conventions and deviations, all configurable where they matter:

* ``capacity`` counts draft nodes below the root; the reference's ``max_num_draft=64`` counts
  the root, so the default 63 gives the same 64-token verification forward (and the
  logits-only tree the same 8/12/17/18/8 nodes per depth). The reference also charges every
  border (a copy of the root) and every duplicate path to the budget; here the budget is
  spent on distinct nodes only, so the tree is always filled when the logits tree can grow.
* ``fail_links="exact"`` (default) follows the paper's Aho-Corasick semantics; ``"lazy"``
  reproduces the reference code, whose links collapse to the root during decoding (see
  :mod:`methods.racer.automaton`). Exact is the default because it is the algorithm the
  paper describes, it finds every matching suffix rather than only the current state's, and
  it costs the same (~50 dict look-ups per step). With ``selection=reference`` those extra,
  shorter matches take budget from the longer ones (lazy is better at small capacities);
  ``best_first`` ranks them by their own continuation shares, and exact is then the better.
* ``logit_source="last"`` is the paper's last-logit ablation: a node's children come from the
  logits that *predicted* that token (for the root, ``ctx.root_topk``, the target's top-k at
  the root's own position) instead of the logits recorded *after* its latest occurrence. Since
  those logits rank the token itself first, that entry is skipped (as LogitSpec skips the next
  token); the table is one column wider so ``max_breadth`` candidates remain.
* ``persist_across_prompts``: the reference keeps the automaton and TokenBin for the whole
  process; the default here rebuilds them (and the logits acceptance rates) for every prompt,
  so results do not depend on order.
* Rows the target never wrote are not expanded (the reference proposes token 0 from them); a
  verified token's row prefers its accepted occurrence over rejected siblings (the reference
  lets the last node in BFS order win).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

import numpy as np
import torch
from annotated_types import Ge

from methods.racer.automaton import FAIL_LINKS, Automaton
from methods.racer.best_first import RankRates, grow_best_first, retrieval_p
from methods.racer.logits_tree import HALVING, TokenBin, grow_logits_tree
from racer_bench.config.schema import PositiveInt
from racer_bench.engine.drafter import DrafterNeeds
from racer_bench.engine.structs import Draft, DraftContext, Feedback, Source
from racer_bench.engine.tree import TrieBuilder, node_depths
from racer_bench.errors import ConfigError

SELECTIONS = ("reference", "best_first")


class RacerDrafter:
    """Retrieval-augmented logits tree drafter (see the module docstring)."""

    name: ClassVar[str] = "racer"
    version: ClassVar[str] = "2"  # 2: best-first tree by default (1: the reference tree)

    def __init__(
        self,
        vocab_size: int,
        capacity: PositiveInt = 63,
        ngram: Annotated[int, Ge(2)] = 10,
        max_nodes: PositiveInt = 10000,
        max_breadth: PositiveInt = 8,
        min_depth: PositiveInt = 2,
        retrieval: bool = True,
        logits: bool = True,
        logit_source: Literal["copy", "last"] = "copy",
        lru: bool = True,
        fail_links: Literal["exact", "lazy"] = "exact",
        halving: Literal["reference", "paper"] = "reference",
        persist_across_prompts: bool = False,
        selection: Literal["best_first", "reference"] = "best_first",
        retrieval_alpha: Annotated[float, Ge(0)] = 0.1,
        extend_windows: bool = True,
    ) -> None:
        _check_args(logit_source, fail_links, halving, ngram, max_nodes, lru, max_breadth)
        _check_selection(selection, retrieval_alpha)
        self.selection = selection
        self.retrieval_alpha = retrieval_alpha
        self.extend_windows = extend_windows
        self.capacity = capacity
        self.ngram = ngram
        self.max_breadth = max_breadth
        self.logit_source = logit_source
        self.halving = halving
        self.persist_across_prompts = persist_across_prompts  # recorded in the run manifest
        width = max_breadth + (logit_source == "last")
        self.needs = DrafterNeeds(topk=width if logits else 0, prefill_topk=logits)
        self.automaton = Automaton(max_nodes, min_depth, lru, fail_links) if retrieval else None
        self.token_bin = TokenBin(vocab_size, width) if logits else None
        self.rates = RankRates(width) if logits else None
        self._tokens: list[int] = []
        self._next_window = 0  # start of the next ngram window to insert
        self._pending_state: int | None = None

    # ----------------------------------------------------------------- protocol
    def reset(self, prompt_ids: list[int], prompt_topk: torch.Tensor | None) -> None:
        if not self.persist_across_prompts:
            if self.automaton is not None:
                self.automaton.clear()
            if self.token_bin is not None:
                self.token_bin.clear()
            if self.rates is not None:
                self.rates.clear()
        self._tokens = list(prompt_ids)
        self._next_window = 0
        self._pending_state = None
        if self.automaton is not None:
            self._insert_windows(len(self._tokens))
            if self.automaton.fail_links == "lazy":
                self.automaton.build()
        if self.token_bin is not None and prompt_topk is not None:
            topk = prompt_topk.cpu().numpy()
            ids = np.asarray(prompt_ids, dtype=np.int64)
            if self.logit_source == "copy":
                self.token_bin.update(ids, topk)
            else:  # row of token i+1 = the logits that predicted it
                self.token_bin.update(ids[1:], topk[:-1])

    def propose(self, ctx: DraftContext) -> Draft:
        if len(ctx.tokens) != len(self._tokens):  # the first root, or a step without update()
            self._tokens = list(ctx.tokens)
            if self.automaton is not None:
                self._insert_windows(len(self._tokens) - 1)
        budget = min(self.capacity, ctx.budget)
        builder = TrieBuilder(budget)
        meta: dict[str, float] = {}
        scores: list[float] = []
        if budget > 0 and ctx.max_depth > 0:
            borders = self._borders(ctx)
            self._last_root_row(ctx)
            if self.selection == "best_first":
                scores = self._grow_best_first(builder, ctx, borders)
            else:
                scores = self._retrieve(builder, ctx, borders)
                self._grow_logits(builder, ctx)
                scores += self._logits_scores(builder, len(scores))
            self._count(builder, borders, meta)
        draft = builder.build(meta)
        draft.score = torch.tensor(scores, dtype=torch.float32)
        draft.score_is_probability = True
        return draft

    def update(self, fb: Feedback) -> None:
        if self.rates is not None:
            self.rates.observe(fb.draft, fb.accepted)
        if self.token_bin is not None and fb.node_topk is not None:
            self._record_step(fb)
        self._tokens.extend(fb.committed)
        automaton = self.automaton
        if automaton is None:
            return
        lazy = automaton.fail_links == "lazy"
        if lazy and self._pending_state is not None:
            automaton.state = self._pending_state  # the root has been consumed
        self._pending_state = None
        self._insert_windows(len(self._tokens) - 1)  # the new root waits for the next step
        if lazy:
            automaton.advance(fb.committed[:-1])

    # ----------------------------------------------------------------- drafting
    def _borders(self, ctx: DraftContext) -> list[int]:
        """Automaton nodes matching a suffix of the context plus the root (deepest first)."""
        automaton = self.automaton
        if automaton is None:
            return []
        if automaton.fail_links == "exact":
            chain = automaton.suffix_chain(ctx.tokens[-self.ngram : -1])
        else:
            chain = automaton.lazy_chain()
        borders, self._pending_state = automaton.borders(ctx.root, chain)
        return borders

    def _last_root_row(self, ctx: DraftContext) -> None:
        """``logit_source=last``: the root's row is the top-k that predicted it."""
        if self.token_bin is not None and self.logit_source == "last" and ctx.root_topk is not None:
            self.token_bin.update(np.asarray([ctx.root]), ctx.root_topk.cpu().numpy()[None])

    def _retrieve(self, builder: TrieBuilder, ctx: DraftContext, borders: list[int]) -> list[float]:
        """Paper selection: the most frequent nodes below the borders; returns their scores."""
        automaton = self.automaton
        if automaton is None:
            return []
        selected = automaton.select(borders, builder.capacity, ctx.max_depth)
        index = dict.fromkeys(borders, -1)
        parent_of, token_of, freq = automaton.parent, automaton.token, automaton.freq
        scores: list[float] = []
        for node in selected:
            parent = index.get(parent_of[node])
            if parent is None:
                continue
            before = len(builder)
            added = builder.add(parent, token_of[node], Source.RETRIEVAL)
            if added >= 0:
                index[node] = added
            if len(builder) > before:
                scores.append(retrieval_p(freq[node], freq[parent_of[node]], self.retrieval_alpha))
        return scores

    def _grow_logits(self, builder: TrieBuilder, ctx: DraftContext) -> None:
        """Paper selection: fill the remaining budget with the breadth-halving logits tree."""
        if self.token_bin is None:
            return
        grow_logits_tree(
            builder,
            ctx.root,
            self.token_bin.row,
            builder.capacity - len(builder),
            ctx.max_depth,
            self.max_breadth,
            self.halving,
            skip_self=self.logit_source == "last",
        )

    def _logits_scores(self, builder: TrieBuilder, start: int) -> list[float]:
        """Scores of the logits nodes ``start..`` (their rank's acceptance estimate)."""
        if self.rates is None or start >= len(builder):
            return []
        depths = node_depths(builder.parents)
        return [self.rates.rate(builder.ranks[i], depths[i]) for i in range(start, len(builder))]

    def _grow_best_first(
        self, builder: TrieBuilder, ctx: DraftContext, borders: list[int]
    ) -> list[float]:
        automaton, token_bin = self.automaton, self.token_bin
        return grow_best_first(
            builder,
            ctx.root,
            borders,
            self._continuations if automaton is not None else None,
            automaton.freq if automaton is not None else [],
            token_bin.row if token_bin is not None else None,
            self.rates,
            ctx.max_depth,
            self.max_breadth,
            self.retrieval_alpha,
            skip_self=self.logit_source == "last",
        )

    def _continuations(self, node: int) -> tuple[int, dict[int, int]]:
        assert self.automaton is not None
        return self.automaton.continuations(node, self.ngram if self.extend_windows else None)

    def _count(self, builder: TrieBuilder, borders: list[int], meta: dict[str, float]) -> None:
        """Per-step counters: nodes by source, borders, automaton size."""
        n_retrieval = sum(s == Source.RETRIEVAL for s in builder.sources)
        meta["retrieval_found"] = float(n_retrieval > 0)
        meta["retrieval_nodes"] = float(n_retrieval)
        meta["logits_nodes"] = float(len(builder) - n_retrieval)
        meta["borders"] = float(len(borders))
        if self.automaton is not None:
            meta["automaton_nodes"] = float(len(self.automaton))

    # ----------------------------------------------------------------- learning
    def _insert_windows(self, end: int) -> None:
        """Insert every full ``ngram`` window of ``self._tokens[:end]`` not inserted yet."""
        automaton, tokens, n = self.automaton, self._tokens, self.ngram
        assert automaton is not None
        for start in range(self._next_window, end - n + 1):
            automaton.insert(tokens[start : start + n])
        self._next_window = max(self._next_window, end - n + 1)

    def _record_step(self, fb: Feedback) -> None:
        """TokenBin rows from one verification; the accepted path is written last (wins)."""
        assert self.token_bin is not None and fb.node_topk is not None
        topk = fb.node_topk.cpu().numpy()
        nodes = fb.draft.tokens.numpy()
        accepted = fb.accepted
        done = set(accepted)
        rejected = [i for i in range(len(nodes)) if i not in done]
        if self.logit_source == "copy":  # row of a token = the logits after it
            pos = np.asarray([i + 1 for i in rejected] + [0] + [i + 1 for i in accepted])
            keys = np.concatenate([[self._tokens[-1]], nodes])[pos]
            self.token_bin.update(keys, topk[pos])
            return
        parents = fb.draft.parents.numpy()  # last: row of a token = the logits that predicted it
        order = np.asarray(rejected + list(accepted), dtype=np.int64)
        last_pos = accepted[-1] + 1 if accepted else 0
        keys = np.concatenate([nodes[order], [fb.committed[-1]]])
        rows = np.concatenate([topk[parents[order] + 1], topk[last_pos : last_pos + 1]])
        self.token_bin.update(keys, rows)


def _check_args(
    logit_source: str,
    fail_links: str,
    halving: str,
    ngram: int,
    max_nodes: int,
    lru: bool,
    max_breadth: int,
) -> None:
    """Raise ConfigError (one line naming the key) for a configuration RACER cannot run."""
    if logit_source not in ("copy", "last"):
        raise ConfigError(f"method.logit_source={logit_source}: allowed values are copy, last")
    if fail_links not in FAIL_LINKS:
        raise ConfigError(f"method.fail_links={fail_links}: allowed values are exact, lazy")
    if halving not in HALVING:
        raise ConfigError(f"method.halving={halving}: allowed values are reference, paper")
    if ngram < 2:
        raise ConfigError(f"method.ngram={ngram}: must be >= 2")
    if lru and max_nodes <= ngram + 1:
        raise ConfigError(f"method.max_nodes={max_nodes}: must exceed ngram + 1 with lru")
    if max_breadth < 1:
        raise ConfigError(f"method.max_breadth={max_breadth}: must be >= 1")


def _check_selection(selection: str, retrieval_alpha: float) -> None:
    """Raise ConfigError for an unknown selection or a negative smoothing constant."""
    if selection not in SELECTIONS:
        allowed = ", ".join(SELECTIONS)
        raise ConfigError(f"method.selection={selection}: allowed values are {allowed}")
    if not retrieval_alpha >= 0:
        raise ConfigError(f"method.retrieval_alpha={retrieval_alpha}: must be >= 0")
