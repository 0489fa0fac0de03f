"""Medusa: K extra heads on the target's last hidden state draft K tokens ahead at once.

Paper: Cai et al., "Medusa: Simple LLM Inference Acceleration Framework with Multiple Decoding
Heads" (2024); code FasterDecoding/Medusa (vendored by Spec-Bench as ``model/medusa``).
Behaviour followed: Medusa-1 heads (``ResBlock`` + the frozen LM head), head ``k`` reads the
hidden state of the last verified position and predicts the token ``k + 2`` ahead (the target's
own LM head gives the root). Deviations:

* the tree is built per step from the heads' top-k (EAGLE-2-style best-first selection by
  cumulative log-probability, :func:`methods.common.draft_tree.grow_tree`) instead of the static
  ``mc_sim_7b_63`` choice list calibrated for Vicuna-7B;
* the LM head is restricted to a draft vocabulary (the most frequent tokens of the
  self-distillation data) so K heads cost far less than K target LM heads on a CPU;
* ``checkpoint: null`` builds random heads (tests only): output stays lossless because
  verification is exact, only acceptance drops.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch

from methods.common.draft_tree import grow_scored_tree, tree_draft
from methods.common.heads.drafter import HeadDrafter, on_feature_device
from methods.medusa.head import MedusaHeads, load_medusa
from racer_bench.config.run import Engine
from racer_bench.config.schema import PositiveInt, Seed
from racer_bench.engine.structs import Draft, DraftContext


class MedusaDrafter(HeadDrafter):
    """Medusa heads drafting a dynamic top-k tree."""

    name: ClassVar[str] = "medusa"
    version: ClassVar[str] = "1"
    random_layers = ()  # the final normed state, what the target's LM head reads
    head: MedusaHeads | None

    def __init__(
        self,
        vocab_size: int,
        checkpoint: str | None = None,
        num_heads: PositiveInt = 4,
        num_layers: PositiveInt = 1,
        topk: PositiveInt = 4,
        total_tokens: PositiveInt = 24,
        seed: Seed = 0,
        engine: Engine = "auto",
    ) -> None:
        self.topk = topk
        self.capacity = total_tokens
        self.num_heads, self.num_layers = num_heads, num_layers
        super().__init__(vocab_size, checkpoint, None, seed, engine)

    def _load_head(self, checkpoint: str) -> MedusaHeads:
        return load_medusa(checkpoint)

    def _checkpoint_layers(self) -> tuple[int, ...]:
        return ()

    def _random_head(self, feature_size: int) -> MedusaHeads:
        torch.manual_seed(self.seed)
        return MedusaHeads(feature_size, self.num_heads, self.num_layers,
                           torch.arange(self.vocab_size))  # fmt: skip

    def _reset_state(self) -> None:
        self._last: torch.Tensor | None = None  # hidden state of the last committed position

    def _consume(self, feats: torch.Tensor, tokens: list[int]) -> None:
        self._last = feats[-1]

    @on_feature_device
    @torch.inference_mode()
    def propose(self, ctx: DraftContext) -> Draft:
        self._catch_up(ctx)
        if self._last is None or ctx.max_depth < 1:
            return Draft.empty()
        assert self.head is not None
        weight = self.head.lm_head.weight
        logp = self.head(self._last[None].to(weight.dtype))[:, 0].log_softmax(-1)  # [K, Vd]
        depth = min(len(logp), ctx.max_depth)
        budget = min(self.capacity, ctx.budget)

        def expand(frontier: list[int], d: int, *_: list[int]) -> torch.Tensor:
            return logp[d - 1].expand(len(frontier), -1)

        tokens, parents, local = grow_scored_tree(logp[0], expand, depth, self.topk, budget)
        return tree_draft(tokens, parents, self.head.draft_ids, [math.exp(x) for x in local])
