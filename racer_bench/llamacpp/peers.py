"""llama.cpp's own prompt lookup as a method: ``method=llamacpp_lookup`` (``backend=llamacpp``).

llama-cpp-python's ``LlamaPromptLookupDecoding`` (apoorvumang's prompt lookup: the longest
suffix n-gram of at most ``max_ngram_size`` tokens, at its earliest earlier occurrence, and the
``num_pred_tokens`` tokens after it). It exists only inside llama-cpp-python, so it runs only
with ``backend=llamacpp``; its keys are the class's arguments, declared here so the schema
checks them like any method's.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from racer_bench.config.schema import PositiveInt
from racer_bench.engine.drafter import DrafterNeeds
from racer_bench.engine.structs import Draft, DraftContext, Feedback

ONLY_HERE = "llamacpp_lookup runs only inside llama.cpp (backend=llamacpp)"


class LlamaLookup:
    """llama-cpp-python's prompt lookup; holds its settings and drafts nothing itself.

    Args:
        max_ngram_size: longest suffix n-gram matched (llama-cpp-python's default 2).
        num_pred_tokens: draft chain length (llama-cpp-python's default 10).
    """

    name: ClassVar[str] = "llamacpp_lookup"
    version: ClassVar[str] = "1"
    needs = DrafterNeeds(backends=("llamacpp",))
    capacity = 0

    def __init__(self, max_ngram_size: PositiveInt = 2, num_pred_tokens: PositiveInt = 10,
                 vocab_size: int | None = None) -> None:  # fmt: skip
        self.max_ngram_size = max_ngram_size
        self.num_pred_tokens = num_pred_tokens

    def lookup(self) -> Any:
        """llama-cpp-python's ``LlamaPromptLookupDecoding`` with these settings."""
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        return LlamaPromptLookupDecoding(self.max_ngram_size, self.num_pred_tokens)

    def reset(self, prompt_ids: list[int], prompt_topk: torch.Tensor | None) -> None:
        raise RuntimeError(ONLY_HERE)

    def propose(self, ctx: DraftContext) -> Draft:
        raise RuntimeError(ONLY_HERE)

    def update(self, fb: Feedback) -> None:
        raise RuntimeError(ONLY_HERE)
