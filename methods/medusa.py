"""Medusa: K extra heads on the target's last hidden state draft K tokens ahead at once.

Paper: Cai et al., "Medusa: Simple LLM Inference Acceleration Framework with Multiple Decoding
Heads" (2024); code FasterDecoding/Medusa (vendored by Spec-Bench as ``model/medusa``).
Behaviour followed: Medusa-1 heads (``ResBlock`` + the frozen LM head), head ``k`` reads the
hidden state of the last verified position and predicts the token ``k + 2`` ahead (the target's
own LM head gives the root). Deviations:

* the tree is built per step from the heads' top-k (EAGLE-2-style best-first selection by
  cumulative log-probability, :func:`methods.heads.grow_tree`) instead of the static
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

from methods.heads import (
    Engine,
    MedusaHeads,
    for_inference,
    grow_scored_tree,
    load_checkpoint,
    tree_draft,
)
from racer_bench.engine.drafter import DrafterNeeds
from racer_bench.engine.structs import Draft, DraftContext, Feedback
from racer_bench.schema import PositiveInt, Seed


class MedusaDrafter:
    """Medusa heads drafting a dynamic top-k tree."""

    name: ClassVar[str] = "medusa"
    version: ClassVar[str] = "1"
    needs = DrafterNeeds(hidden_states=True)

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
        self.vocab_size, self.engine = vocab_size, engine
        self.topk = topk
        self.capacity = total_tokens
        self.seed = seed
        self.num_heads, self.num_layers = num_heads, num_layers
        self.heads: MedusaHeads | None = None
        if checkpoint is not None:
            data = load_checkpoint(checkpoint, "medusa")
            cfg = data["config"]
            self.heads = MedusaHeads(
                cfg["hidden_size"], cfg["num_heads"], cfg["num_layers"], data["state"]["draft_ids"]
            )
            self.heads.load_state_dict(data["state"])
            for_inference(self.heads, engine)
        self._last: torch.Tensor | None = None

    def _random_heads(self, hidden_size: int) -> MedusaHeads:
        torch.manual_seed(self.seed)
        heads = MedusaHeads(
            hidden_size, self.num_heads, self.num_layers, torch.arange(self.vocab_size)
        )
        return for_inference(heads, self.engine)

    def reset(self, prompt_ids: list[int], prompt_topk: torch.Tensor | None) -> None:
        self._last = None

    @torch.inference_mode()
    def propose(self, ctx: DraftContext) -> Draft:
        if ctx.hidden is not None:
            self._last = ctx.hidden[-1]
        if self._last is None or ctx.max_depth < 1:
            return Draft.empty()
        if self.heads is None:
            self.heads = self._random_heads(self._last.shape[-1])
        weight = self.heads.lm_head.weight
        logp = self.heads(self._last[None].to(weight.dtype))[:, 0].log_softmax(-1)  # [K, Vd]
        depth = min(len(logp), ctx.max_depth)
        budget = min(self.capacity, ctx.budget)

        def expand(frontier: list[int], d: int, *_: list[int]) -> torch.Tensor:
            return logp[d - 1].expand(len(frontier), -1)

        tokens, parents, local = grow_scored_tree(logp[0], expand, depth, self.topk, budget)
        return tree_draft(tokens, parents, self.heads.draft_ids, [math.exp(x) for x in local])

    def update(self, fb: Feedback) -> None:
        if fb.hidden is not None:
            self._last = fb.hidden[fb.accepted[-1] + 1 if fb.accepted else 0]
