"""``conf/backend``: which engine runs a benchmark, and the vLLM and llama.cpp engines' settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from annotated_types import Interval

from racer_bench.config.schema import NonNegativeInt, PositiveInt


@dataclass
class BackendConfig:
    """Schema of ``conf/backend/*.yaml``.

    ``native`` is the harness's own batch-1 loop; ``vllm`` runs the same method and task inside
    vLLM at each of ``batch_sizes``; ``llamacpp`` runs them inside llama.cpp (batch 1). The
    other keys only apply to ``vllm``, but ``num_speculative_tokens`` and the ``llamacpp`` ones.
    """

    name: Literal["native", "vllm", "llamacpp"] = "native"
    # vllm only. offline: llm.generate batches at each of batch_sizes (offline.py) | serve: two
    # `vllm serve` processes driven by `vllm bench serve` at each concurrency (serving.py)
    mode: Literal["offline", "serve"] = "offline"
    concurrency: list[PositiveInt] = field(default_factory=lambda: [1, 2, 4, 8, 16])
    ready_timeout_s: Annotated[float, Interval(gt=0)] = 600.0  # serve: seconds to /health
    batch_sizes: list[PositiveInt] = field(default_factory=lambda: [1])
    num_speculative_tokens: PositiveInt = 5  # draft chain length; vLLM verifies chains only
    # auto: confidence for our drafters, fixed for vLLM's own proposers | fixed: every step
    # verifies each request's whole chain (up to num_speculative_tokens) | confidence: each
    # step keeps, over the whole batch, the chain tokens whose estimated acceptance pays for
    # their measured verification cost, zero included (racer_bench/vllm_backend/budget.py)
    draft_length: Literal["auto", "fixed", "confidence"] = "auto"
    max_model_len: PositiveInt = 4096
    kv_cache_gib: PositiveInt = 2  # VLLM_CPU_KVCACHE_SPACE per engine (two engines run)
    # VLLM_CPU_OMP_THREADS_BIND: usable (ours: every usable core, one thread each, computed from
    # this process's CPU affinity) | auto (vLLM's: one core held back) | nobind | "0-1" ...
    # (racer_bench/vllm_backend/cpu.py says how vLLM reads it and why usable is the default)
    threads_bind: str = "usable"
    # usable: cores held back from the binding (None: 0); otherwise handed to vLLM as
    # VLLM_CPU_NUM_OF_RESERVED_CPU (None: vLLM's default, which it applies to auto only)
    reserved_cpus: NonNegativeInt | None = None
    # auto: model.dtype when explicit, else float32 (vLLM's kernels are not row-invariant: in
    # bfloat16 its speculative outputs stop equalling its AR's; racer_bench/vllm_backend/cpu.py)
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    # at a batch size whose prompts make fewer timed batches, passes over the prompts repeat
    # until there are this many (a partial last batch counts by its fill): the speedup's
    # interval is over batches (racer_bench/vllm_backend/batching.py)
    min_batches: PositiveInt = 5
    preload_iomp: bool = True  # LD_PRELOAD Intel OpenMP for the engine (vLLM's CPU advice)
    enforce_eager: bool = True
    # vLLM's prefix cache (the same on both engines) would let an engine skip the prefill of a
    # prompt it decoded before (at a smaller batch size, in an earlier pass, or in an earlier job
    # on the shared baseline engine): off, so both engines pay every prefill
    prefix_caching: bool = False
    tensor_parallel_size: PositiveInt = 1  # GPUs per engine
    gpu_memory_utilization: Annotated[float, Interval(gt=0, le=1)] = (
        0.4  # per engine on a GPU (two engines share it)
    )
    # llamacpp only (racer_bench/llamacpp): context per engine; the extra buffer types that
    # repack weights: auto (probed in a child process first) | on | off; the probe's time limit
    n_ctx: PositiveInt = 4096
    extra_bufts: Literal["auto", "on", "off"] = "auto"
    probe_timeout_s: Annotated[float, Interval(gt=0)] = 120.0
