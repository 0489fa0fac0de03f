"""EAGLE-3-style drafter: one decoder layer on fused low/mid/high target features.

Paper: Li et al., "EAGLE-3: Scaling up Inference Acceleration of Large Language Models via
Training-Time Test" (2025); code SafeAILab/EAGLE (``eagle/model/cnets.py``), vendored by
Spec-Bench as ``model/eagle3``. Behaviour followed: the target's hidden states after three
layers (HF ``hidden_states`` indices ``2, L//2, L-3`` by default) are concatenated and fused by
``fc``; the layer reads ``[norm(embed(token)); norm(hidden)]``, keeps its own KV cache over
committed positions, and drafts autoregressively from its own output hidden state; the tree is
EAGLE-2's dynamic tree (expand the ``topk`` best nodes per depth, keep ``total_tokens`` by
cumulative log-probability). The LM head predicts over a draft vocabulary (``d2t``).

Deviations: RoPE without Llama-3 frequency scaling; ``checkpoint: null`` builds a random head
(tests only; lossless since verification is exact). Checkpoints are either trained here
(``scripts/train_drafter.py kind=eagle3``) or a published EAGLE-3 folder
(``config.json`` + ``model.safetensors``/``pytorch_model.bin``), see
:func:`methods.eagle3.checkpoint.load_eagle3`.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch

from methods.common.draft_tree import grow_scored_tree, tree_draft
from methods.common.heads.drafter import HeadDrafter, on_feature_device
from methods.eagle3.checkpoint import load_eagle3
from methods.eagle3.head import Eagle3Head, eagle3_config
from racer_bench.config.run import Engine
from racer_bench.config.schema import NonNegativeInt, PositiveInt, Seed
from racer_bench.engine.structs import Draft, DraftContext


class Eagle3Drafter(HeadDrafter):
    """EAGLE-3 draft head with its own KV cache and a dynamic draft tree."""

    name: ClassVar[str] = "eagle3"
    version: ClassVar[str] = "1"
    head: Eagle3Head | None

    def __init__(
        self,
        vocab_size: int,
        checkpoint: str | None = None,
        feature_layers: list[NonNegativeInt] | None = None,
        embed_from: str | None = None,
        depth: PositiveInt = 5,
        topk: PositiveInt = 4,
        total_tokens: PositiveInt = 24,
        seed: Seed = 0,
        engine: Engine = "auto",
    ) -> None:
        self.depth, self.topk, self.capacity = depth, topk, total_tokens
        self.embed_from = embed_from
        super().__init__(vocab_size, checkpoint, feature_layers, seed, engine)

    def _load_head(self, checkpoint: str) -> Eagle3Head:
        return load_eagle3(checkpoint, self.embed_from)

    def _reset_state(self) -> None:
        self._keys: torch.Tensor | None = None  # [P, kv_heads, D] committed positions
        self._values: torch.Tensor | None = None
        self._last: torch.Tensor | None = None  # layer output at the last committed pair [H]

    def _random_head(self, feature_size: int) -> Eagle3Head:
        n = len(self.needs.hidden_layers)
        cfg = eagle3_config(feature_size // n, feature_size, self.vocab_size)
        torch.manual_seed(self.seed)
        return Eagle3Head(cfg, torch.arange(self.vocab_size))

    @on_feature_device
    @torch.inference_mode()
    def propose(self, ctx: DraftContext) -> Draft:
        self._catch_up(ctx)
        if self._last is None or ctx.max_depth < 1:
            return Draft.empty()
        head = self.head
        assert head is not None
        root_logp = head.logits(self._last[None])[0].log_softmax(-1)
        grower = _TreeRun(head, self._keys, self._values, self._last)
        depth = min(self.depth, ctx.max_depth)
        budget = min(self.capacity, ctx.budget)
        tokens, parents, local = grow_scored_tree(
            root_logp, grower.expand, depth, self.topk, budget
        )
        return tree_draft(tokens, parents, head.draft_ids, [math.exp(x) for x in local])

    def _consume(self, feats: torch.Tensor, tokens: list[int]) -> None:
        """Run the layer over committed (feature, next token) pairs and extend its KV cache."""
        head = self.head
        assert head is not None
        dtype = head.fc.weight.dtype
        past = 0 if self._keys is None else len(self._keys)
        n = len(tokens)
        pos = torch.arange(past, past + n)
        hidden = head.fc(feats.to(dtype))
        x = head.midlayer.inputs(head.embed_tokens(torch.tensor(tokens)), hidden)
        k, v = head.midlayer.self_attn.project_kv(x, pos)
        if self._keys is not None and self._values is not None:
            k, v = torch.cat([self._keys, k]), torch.cat([self._values, v])
        mask = torch.ones(n, past + n, dtype=torch.bool).tril(past)
        attn = head.midlayer.self_attn(x, pos, k, v, mask)
        self._keys, self._values = k, v
        self._last = head.midlayer.finish(hidden, attn)[-1]


class _TreeRun:
    """Draft-node keys, values and hidden states while one tree grows (tree attention)."""

    def __init__(
        self, head: Eagle3Head, keys: torch.Tensor | None, values: torch.Tensor | None,
        last: torch.Tensor,
    ) -> None:  # fmt: skip
        self.head = head
        self.past = 0 if keys is None else len(keys)
        shape = (0, head.midlayer.self_attn.kv_heads, head.midlayer.self_attn.head_dim)
        empty = torch.zeros(shape, dtype=last.dtype)
        self.keys = keys if keys is not None else empty
        self.values = values if values is not None else empty
        self.last = last
        self.rows: list[int] = []  # node index of every draft KV row
        self.hidden: dict[int, torch.Tensor] = {}

    def expand(
        self, frontier: list[int], d: int, tokens: list[int], parents: list[int]
    ) -> torch.Tensor:
        """Log-probabilities FloatTensor[F, Vd] of the children of ``frontier`` (depth d - 1)."""
        head, n = self.head, len(frontier)
        ids = head.draft_ids[torch.tensor([tokens[i] for i in frontier])]
        hidden = torch.stack([self.hidden.get(parents[i], self.last) for i in frontier])
        x = head.midlayer.inputs(head.embed_tokens(ids), hidden)
        pos = torch.full((n,), self.past + d - 2)
        k, v = head.midlayer.self_attn.project_kv(x, pos)
        self.keys, self.values = torch.cat([self.keys, k]), torch.cat([self.values, v])
        mask = torch.zeros(n, len(self.keys), dtype=torch.bool)
        mask[:, : self.past] = True
        for row, node in enumerate(frontier):
            ancestors = _ancestors(node, parents)
            for j, other in enumerate(self.rows):
                mask[row, self.past + j] = other in ancestors
        self.rows += frontier
        mask[:, len(self.keys) - n :] = torch.eye(n, dtype=torch.bool)
        out = head.midlayer.finish(
            hidden, head.midlayer.self_attn(x, pos, self.keys, self.values, mask)
        )
        for row, node in enumerate(frontier):
            self.hidden[node] = out[row]
        return head.logits(out).log_softmax(-1)


def _ancestors(node: int, parents: list[int]) -> set[int]:
    found: set[int] = set()
    p = parents[node]
    while p >= 0:
        found.add(p)
        p = parents[p]
    return found
