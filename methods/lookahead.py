"""Lookahead decoding: a Jacobi lookahead window feeds an n-gram pool that supplies the drafts.

Paper: Fu, Bailis, Stoica, Zhang, "Break the Sequential Dependency of LLM Inference Using
Lookahead Decoding", ICML 2024 (arXiv 2402.02057). Reference code: hao-ai-lab/LookaheadDecoding
(``lade/decoding.py``: ``jacobi_greedy_search_multilevel``, ``update_token_map``;
``lade/models/llama.py``: ``j_make_causal_mask_multilevel``), vendored by Spec-Bench as
``model/lade``. Behaviour followed:

* the window has N-1 levels; level 0 starts as W+N-3 tokens drawn from the prompt
  (``random.choice``, here seeded by ``seed`` and re-seeded on every ``reset``), the others
  empty; the first N-2 steps only fill one more level each (warm-up, no drafts);
* level 0 is causal; the token of level l in column c sees the root, level-0 tokens before
  column c and the column-c tokens of levels 1..l, at position root + l + c; all of it rides
  in the verification forward as :class:`~racer_bench.engine.structs.AuxBranch`;
* after each step, column c yields the n-gram (key, level1[c], ..., level_{N-2}[c], new[c]),
  key = the root for c = 0 and level0[c-1] after, into a pool of at most G n-grams per key
  with LRU order; the window always moves by one (``ALWAYS_FWD_ONE``);
* the draft is every pooled n-gram whose key is the root (the verification branch), merged
  into one trie (source RETRIEVAL); optional ``pool_from_prompt`` seeds the pool with the
  prompt's n-grams and adds those of the output (newer reference's ``POOL_FROM_PROMPT``);
  the pool is per prompt as in the reference unless ``persist_across_prompts``.

Deviations: shared prefixes of the guesses are verified once (trie) instead of once per n-gram
(same accepted tokens, fewer forwarded ones); a fully matched guess keeps its bonus token (the
reference drops it); the warm-up starts after a separate prefill, so it takes one more step.

Cost per step: root + (N-1)W - 1 window tokens + up to G(N-1) draft nodes (7B defaults
N=5, W=7, G=7: 28 + 27). ``capacity`` counts the draft nodes only; ``aux_capacity`` the window.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence
from typing import Annotated, ClassVar

import numpy as np
import torch
from annotated_types import Ge

from racer_bench.config.schema import PositiveInt, Seed
from racer_bench.engine.drafter import DrafterNeeds
from racer_bench.engine.structs import AuxBranch, Draft, DraftContext, Feedback, Source
from racer_bench.engine.tree import TrieBuilder

Ngram = tuple[int, ...]


class NgramPool:
    """Key token -> at most ``guess_set_size`` (N-1)-grams, least recently added first."""

    def __init__(self, guess_set_size: int) -> None:
        self.guess_set_size = guess_set_size
        self._map: dict[int, dict[Ngram, None]] = {}  # dicts keep insertion (LRU) order

    def add(self, key: int, ngram: Ngram) -> None:
        """Insert or refresh ``ngram`` under ``key``; the oldest one goes when the set is full."""
        entries = self._map.setdefault(key, {})
        if ngram in entries:
            del entries[ngram]
        elif len(entries) >= self.guess_set_size:
            del entries[next(iter(entries))]
        entries[ngram] = None

    def add_sequence(self, tokens: Sequence[int], n: int) -> None:
        """Add every n-gram of ``tokens`` (key = its first token) in order."""
        for i in range(len(tokens) - n + 1):
            self.add(int(tokens[i]), tuple(int(t) for t in tokens[i + 1 : i + n]))

    def guesses(self, key: int) -> list[Ngram]:
        return list(self._map.get(key, ()))

    def __len__(self) -> int:
        return sum(len(v) for v in self._map.values())


def init_window(
    prompt: Sequence[int], window: int, level: int, rng: random.Random
) -> list[list[int]]:
    """Level 0 of a fresh window: W+N-3 tokens drawn from the prompt (the reference's init)."""
    pool = list(prompt) or [0]
    return [[rng.choice(pool) for _ in range(window + level - 3)]]


def window_aux(levels: list[list[int]]) -> AuxBranch:
    """The window as an aux branch: tokens, depths and the Jacobi attention mask.

    Args:
        levels: level 0 (``w - 1`` tokens) then the filled levels (``w`` tokens each).

    Returns:
        AuxBranch with A = (w - 1) + (len(levels) - 1) * w tokens: level 0's token j at depth
        j + 1; level l's token in column c at depth l + c.
    """
    width = len(levels[0]) + 1
    if any(len(lv) != width for lv in levels[1:]):
        raise ValueError(f"window levels must have {width} tokens after level 0")
    depths, mask = _window_layout(width - 1, len(levels) - 1)
    tokens = torch.tensor([t for lv in levels for t in lv], dtype=torch.long)
    return AuxBranch(tokens, torch.from_numpy(depths.copy()), torch.from_numpy(mask.copy()))


@functools.lru_cache(maxsize=64)
def _window_layout(l0: int, filled: int) -> tuple[np.ndarray, np.ndarray]:
    """Depths int64[A] and mask bool[A, A] of a window with ``filled`` levels after level 0.

    numpy, cached by shape: tiny torch ops cost more than the whole layout on a busy CPU.
    """
    width = l0 + 1
    # block column: level-0 token j sits in column j + 1 (column 0 is the root)
    col = np.concatenate([np.arange(1, width)] + [np.arange(width)] * filled)
    lvl = np.repeat(np.arange(filled + 1), [l0] + [width] * filled)
    depths = lvl + col
    # every token sees the level-0 tokens up to its own column, and its own column in levels
    # 1..its level: a chain of consecutive positions from the root.
    to_l0 = (lvl[None, :] == 0) & (col[None, :] <= col[:, None])
    same_col = (lvl[None, :] >= 1) & (lvl[None, :] <= lvl[:, None]) & (col[None, :] == col[:, None])
    return depths.astype(np.int64), to_l0 | same_col


def advance_window(
    levels: list[list[int]], argmax: Sequence[int], root: int, level: int
) -> tuple[list[list[int]], list[tuple[int, Ngram]]]:
    """One Jacobi step of the window from the target's argmax after each window token.

    Args:
        levels: the window that was forwarded (see :func:`window_aux`).
        argmax: target argmax after each aux token, in :func:`window_aux` order.
        root: the root of that forward (key of column 0's n-gram).
        level: N, the n-gram size.

    Returns:
        (next window, harvested (key, (N-1)-gram) pairs; none during warm-up).
    """
    l0, last = len(levels[0]), len(levels) - 1
    width = l0 + 1
    start = 0 if last == 0 else l0 + (last - 1) * width
    preds = [int(t) for t in argmax[start : start + (l0 if last == 0 else width)]]
    if last < level - 2:  # warm-up: every level drops its first column, one level is added
        return [lv[1:] for lv in levels] + [preds if last == 0 else preds[1:]], []
    keys = [root, *levels[0]]
    harvest = [(keys[c], (*(lv[c] for lv in levels[1:]), preds[c])) for c in range(width)]
    return [levels[1][1:], *levels[2:], preds], harvest


def window_sizes(window: int, level: int) -> list[int]:
    """Aux tokens forwarded in each warm-up step and then in every later step."""
    sizes = []
    for filled in range(level - 1):
        l0 = window + level - 3 - filled
        sizes.append(l0 + filled * (l0 + 1))
    return sizes


def guess_draft(guesses: Sequence[Ngram], budget: int, max_depth: int) -> Draft:
    """The verification branch: the guesses merged into one trie, cut to budget and depth.

    ``Draft.score`` counts the pooled guesses through each node (the pool hits).
    """
    builder = TrieBuilder(budget, score_merge="sum")
    for ngram in guesses:
        builder.add_path(ngram[:max_depth], Source.RETRIEVAL, score=1.0)
    return builder.build()


class LookaheadDrafter:
    """Lookahead decoding: Jacobi window (aux branch) + n-gram pool (draft tree)."""

    name: ClassVar[str] = "lookahead"
    version: ClassVar[str] = "1"
    needs = DrafterNeeds()

    def __init__(
        self,
        vocab_size: int,
        level: Annotated[int, Ge(3)] = 5,
        window: PositiveInt = 7,
        guess_set_size: PositiveInt = 7,
        pool_from_prompt: bool = False,
        persist_across_prompts: bool = False,
        seed: Seed = 0,
    ) -> None:
        if level < 3 or window < 1 or guess_set_size < 0:
            raise ValueError(
                f"method.level={level}, window={window}, guess_set_size={guess_set_size}: "
                "need level >= 3, window >= 1, guess_set_size >= 0"
            )
        self.level = level
        self.window = window
        self.guess_set_size = guess_set_size
        self.pool_from_prompt = pool_from_prompt
        self.persist_across_prompts = persist_across_prompts
        self.seed = seed
        self.capacity = guess_set_size * (level - 1)
        self.aux_capacity = max(window_sizes(window, level))
        self.pool = NgramPool(guess_set_size)
        self.reset([0], None)

    def reset(self, prompt_ids: list[int], prompt_topk: torch.Tensor | None) -> None:
        rng = random.Random(self.seed)  # same window init whatever the prompt order
        self.levels = init_window(prompt_ids, self.window, self.level, rng)
        if not self.persist_across_prompts:
            self.pool = NgramPool(self.guess_set_size)
        if self.pool_from_prompt:
            self.pool.add_sequence(prompt_ids, self.level)
        self._recent = list(prompt_ids[-(self.level - 1) :])
        self._root = prompt_ids[-1] if prompt_ids else 0

    @property
    def warming_up(self) -> bool:
        return len(self.levels) < self.level - 1

    def propose(self, ctx: DraftContext) -> Draft:
        self._root = ctx.root
        guesses = [] if self.warming_up else self.pool.guesses(ctx.root)
        draft = guess_draft(guesses, min(self.capacity, ctx.budget), ctx.max_depth)
        draft.aux = window_aux(self.levels)
        draft.meta = {
            "retrieval_found": float(len(draft) > 0),
            "n_guesses": float(len(guesses)),
            "aux_size": float(len(draft.aux)),
            "pool_size": float(len(self.pool)),
        }
        return draft

    def update(self, fb: Feedback) -> None:
        if fb.aux_argmax is None:
            raise ValueError("lookahead: the decode loop returned no aux_argmax for the window")
        self.levels, harvest = advance_window(
            self.levels, fb.aux_argmax.tolist(), self._root, self.level
        )
        for key, ngram in harvest:
            self.pool.add(key, ngram)
        if self.pool_from_prompt:
            recent = self._recent + list(fb.committed)
            self.pool.add_sequence(recent[-(len(fb.committed) + self.level - 1) :], self.level)
            self._recent = recent[-(self.level - 1) :]
