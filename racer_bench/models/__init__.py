"""Target models: the factories that ``conf/model/*.yaml`` name (:mod:`.loaders`, re-exported
here so ``_target_: racer_bench.models.load_smollm2`` stays short and old run folders resume)
and the byte tokenizer of the tiny test model (:mod:`.tiny_tokenizer`)."""

from racer_bench.models.loaders import (
    load_gemma3,
    load_hf,
    load_smollm2,
    resolve_device,
    resolve_dtype,
    tiny_random,
)

__all__ = [
    "load_gemma3",
    "load_hf",
    "load_smollm2",
    "resolve_device",
    "resolve_dtype",
    "tiny_random",
]
