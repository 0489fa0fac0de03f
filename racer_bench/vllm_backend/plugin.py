"""A vLLM general plugin: shows our proposer what vLLM's ``custom_class`` call leaves out.

vLLM 0.32 calls a ``custom_class`` proposer with each batch row's tokens only: no request ids
and no logits. The plugin (entry point ``vllm.general_plugins: racer_bench``, loaded by vLLM in
every engine and worker process before the model runner is built) wraps the runner's
``_sample`` so that, when the runner's drafter is ours, the drafter first sees the batch (for
request ids and prompt lengths) and the target's top-k at every sampled row. With any other
proposer, or none, the wrapper only delegates. Nothing else of vLLM is changed.
"""

from __future__ import annotations

import functools
from typing import Any

PATCHED = "_racer_bench_patched"


def register() -> None:
    """Entry point: wrap ``GPUModelRunner._sample`` once per process (CPU runner included)."""
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    original = GPUModelRunner._sample
    if getattr(original, PATCHED, False):
        return

    @functools.wraps(original)
    def _sample(self: Any, logits: Any, spec_decode_metadata: Any) -> Any:
        observe = getattr(getattr(self, "drafter", None), "observe_sample", None)
        if observe is not None and logits is not None:
            observe(self.input_batch, logits, spec_decode_metadata)
        return original(self, logits, spec_decode_metadata)

    setattr(_sample, PATCHED, True)
    GPUModelRunner._sample = _sample
