"""One ``llama_cpp.Llama`` and a greedy generation under the harness's stop rule.

The prompt goes in as token ids (the run's own, from the task's rendering with the run's
tokenizer), so llama.cpp sees exactly what our loop sees; each generation starts from an empty
KV cache (``reset`` first: llama-cpp-python would otherwise reuse a cached prefix of the previous
prompt and skip part of the prefill). Sampling is llama.cpp's greedy sampler
(``temp=0``, ``repeat_penalty=1``); EOS ids, ``max_new_tokens`` and the task's stop strings are
applied token by token by :class:`~racer_bench.engine.stopping.StopRule`, as in our loop.
"""

from __future__ import annotations

import atexit
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from racer_bench.engine.stopping import StopRule
from racer_bench.llamacpp.bufts import model_params
from racer_bench.llamacpp.compat import require

N_BATCH = 512  # llama.cpp's default: prompt tokens per eval


@dataclass
class Generation:
    """One turn: new token ids, seconds to the first token (prefill) and after, why it ended."""

    tokens: list[int]
    prefill_time: float
    decode_time: float
    stop_reason: str | None


class LlamaEngine:
    """A GGUF loaded by llama.cpp; with ``draft`` its ``generate`` speculates through the hook.

    Args:
        gguf: the model file.
        n_ctx: context (prompt + generated + a draft) per generation.
        threads: llama.cpp's threads, for decode and for batches (changed per generation).
        use_extra_bufts: llama.cpp's extra buffer types (:mod:`.bufts` decides).
        draft: a llama-cpp-python draft model (``__call__(input_ids) -> draft ids``); it makes
            llama-cpp-python keep the logits of every position (``logits_all``).
    """

    def __init__(self, gguf: Path, n_ctx: int, threads: int, use_extra_bufts: bool,
                 draft: Any = None) -> None:  # fmt: skip
        llama_cpp = require("llama.cpp")
        self.n_ctx = n_ctx
        with model_params(use_extra_bufts):
            # logits_all with a draft: llama-cpp-python keeps every position's logits then, but
            # sizes that array by this argument (n_batch rows without it), so a context past
            # n_batch tokens failed in Llama.eval (a ValueError on long Spec-Bench prompts)
            self.llm = llama_cpp.Llama(str(gguf), n_ctx=n_ctx, n_batch=N_BATCH,
                                       n_threads=threads, n_threads_batch=threads,
                                       draft_model=draft, logits_all=draft is not None, seed=0,
                                       verbose=False)  # fmt: skip
        self.threads = threads
        atexit.register(self.close)  # before interpreter teardown, where freeing fails

    @property
    def vocab_size(self) -> int:
        return int(self.llm.n_vocab())

    def set_threads(self, threads: int) -> None:
        """Decode and batch threads for the next generation (the run's count for the prompt)."""
        if threads != self.threads:
            require("llama.cpp").llama_set_n_threads(self.llm.ctx, threads, threads)
            self.threads = threads

    def generate(self, ids: list[int], stop: StopRule) -> Generation:
        """Greedy from ``ids`` until ``stop`` ends it; timed from the first eval."""
        if len(ids) + stop.max_new_tokens > self.n_ctx:
            raise ValueError(f"prompt of {len(ids)} tokens + {stop.max_new_tokens} new exceeds "
                             f"llama.cpp's context of {self.n_ctx} (backend.n_ctx)")  # fmt: skip
        self.llm.reset()
        tokens: list[int] = []
        reason, first = None, None
        start = time.perf_counter()
        steps = self.llm.generate(ids, temp=0.0, repeat_penalty=1.0, reset=True)
        for token in steps:
            first = first or time.perf_counter()
            keep, reason = stop.cut(tokens, [int(token)])
            tokens += [int(token)][:keep]
            if reason is not None:
                break
        steps.close()
        end = time.perf_counter()
        first = first or end
        return Generation(tokens, first - start, end - first, reason)

    def close(self) -> None:
        """Free the model and context now (not at interpreter exit, where llama-cpp-python's
        finalizer finds its library gone); closing twice does nothing."""
        self.llm.close()
