"""vLLM's own proposers (``ngram``, ``suffix``) as methods: ``method=vllm_ngram|vllm_suffix``.

They exist only inside vLLM, so they run only with ``backend=vllm``; the native runner refuses
them with a one-line error. Their keys are vLLM's ``SpeculativeConfig`` fields, declared here
so the schema checks them like any method's.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import torch
from annotated_types import Interval

from racer_bench.config.schema import PositiveInt
from racer_bench.engine.drafter import DrafterNeeds
from racer_bench.engine.structs import Draft, DraftContext, Feedback


class VllmBuiltin:
    """A vLLM built-in proposer; holds its ``speculative_config`` and drafts nothing itself.

    Args:
        method: vLLM's method name.
        num_speculative_tokens: draft length (None: the backend's ``num_speculative_tokens``).
        prompt_lookup_min / prompt_lookup_max: ``ngram``'s n-gram bounds.
        suffix_*: ``suffix``'s settings (vLLM's defaults; the ``arctic-inference`` package).
    """

    name: ClassVar[str] = "vllm_builtin"
    version: ClassVar[str] = "1"
    needs = DrafterNeeds(backends=("vllm",))
    capacity = 0

    def __init__(
        self,
        method: Literal["ngram", "suffix"] = "ngram",
        num_speculative_tokens: PositiveInt | None = None,
        prompt_lookup_min: PositiveInt = 2,
        prompt_lookup_max: PositiveInt = 4,
        suffix_max_tree_depth: PositiveInt = 24,
        suffix_max_cached_requests: PositiveInt = 10000,
        suffix_max_spec_factor: Annotated[float, Interval(gt=0)] = 1.0,
        suffix_min_token_prob: Annotated[float, Interval(ge=0, le=1)] = 0.1,
        vocab_size: int | None = None,
    ) -> None:
        if prompt_lookup_min > prompt_lookup_max:
            raise ValueError(f"method.prompt_lookup_min={prompt_lookup_min} is above "
                             f"method.prompt_lookup_max={prompt_lookup_max}")  # fmt: skip
        self.method = method
        self.num_speculative_tokens = num_speculative_tokens
        self.options: dict[str, Any] = (
            {"prompt_lookup_min": prompt_lookup_min, "prompt_lookup_max": prompt_lookup_max}
            if method == "ngram"
            else {
                "suffix_decoding_max_tree_depth": suffix_max_tree_depth,
                "suffix_decoding_max_cached_requests": suffix_max_cached_requests,
                "suffix_decoding_max_spec_factor": suffix_max_spec_factor,
                "suffix_decoding_min_token_prob": suffix_min_token_prob,
            }
        )

    def speculative_config(self, default_tokens: int) -> dict[str, Any]:
        """vLLM's ``speculative_config`` for this proposer."""
        k = self.num_speculative_tokens or default_tokens
        return {"method": self.method, "num_speculative_tokens": k, **self.options}

    def reset(self, prompt_ids: list[int], prompt_topk: torch.Tensor | None) -> None:
        raise RuntimeError(f"vllm_{self.method} runs only inside vLLM (backend=vllm)")

    def propose(self, ctx: DraftContext) -> Draft:
        raise RuntimeError(f"vllm_{self.method} runs only inside vLLM (backend=vllm)")

    def update(self, fb: Feedback) -> None:
        raise RuntimeError(f"vllm_{self.method} runs only inside vLLM (backend=vllm)")
