"""``reference=llamacpp``: the same GGUF through llama.cpp, timed in the native rotation.

Beside the AR baseline, the method and (with ``generate``) transformers' ``generate()``, every
prompt also runs through llama-cpp-python's greedy loop on the GGUF our loader dequantizes
(Q4_1 for SmolLM2): the same prompt token ids, the same thread count as the prompt's (the run's
thread governor may change it between prompts), the same ``max_new_tokens`` and stop rule. The
weights are Q4_1 blocks there and dequantized floats in our loop, so its outputs are expected to
differ from our AR's; the summary counts how many do not.
"""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig

from racer_bench.analysis.summary import LLAMACPP_REFERENCE
from racer_bench.engine.stopping import StopRule
from racer_bench.engine.target import HFTarget
from racer_bench.llamacpp import bufts
from racer_bench.llamacpp.compat import check_run, gguf_path, version
from racer_bench.llamacpp.engine import LlamaEngine
from racer_bench.record import folder as records
from racer_bench.run import reference
from racer_bench.tasks.base import Prompt, Task
from racer_bench.tasks.conversation import conversation

N_CTX = 4096  # the native backend has no llama.cpp keys; prompt + new tokens must fit


class LlamaReference:
    """llama.cpp's AR on one GGUF, answering the run's prompts through the run's tokenizer."""

    key = LLAMACPP_REFERENCE

    def __init__(self, target: HFTarget, engine: LlamaEngine, info: dict[str, Any]) -> None:
        self.target, self.engine, self.info = target, engine, info

    def turns(self, task: Task, prompt: Prompt, max_new_tokens: int) -> list[dict[str, Any]]:
        """Every turn of one prompt; later turns see llama.cpp's own answers."""
        tokenizer = self.target.tokenizer
        stop = StopRule(self.target.eos_ids, max_new_tokens, task.stop_strings,
                        decode=tokenizer.decode)  # fmt: skip
        self.engine.set_threads(torch.get_num_threads())

        def answer(ids: list[int]) -> dict[str, Any]:
            done = self.engine.generate(ids, stop)
            text = stop.clean_text(tokenizer.decode(done.tokens, skip_special_tokens=True))
            return records.turn_record(done.tokens, text, done.stop_reason or "length",
                                       prefill_time=done.prefill_time,
                                       decode_time=done.decode_time)  # fmt: skip

        return conversation(prompt, task, tokenizer, answer)

    def details(self) -> dict[str, Any]:
        return self.info | {"threads_now": self.engine.threads}


def build(cfg: DictConfig, target: HFTarget) -> LlamaReference:
    """The llama.cpp reference for a run: the extra buffer types checked first (:mod:`.bufts`)."""
    check_run(cfg)
    gguf = gguf_path(cfg, "reference=llamacpp")
    threads = torch.get_num_threads()
    llama_version = version()
    decided = bufts.verdict(gguf, threads, "auto", cfg.paths.cache_dir, llama_version)
    engine = LlamaEngine(gguf, N_CTX, threads, bool(decided["use_extra_bufts"]))
    info = {"engine": "llama.cpp", "llama_cpp_python": llama_version, "gguf": gguf.name,
            "threads": threads, "n_ctx": N_CTX, "extra_bufts": decided,
            "sampling": "greedy (temp=0, repeat_penalty=1)",
            "weights": "the GGUF's own blocks; our loop runs them dequantized"}  # fmt: skip
    return LlamaReference(target, engine, info)


def register() -> None:
    """Make ``reference=llamacpp`` known to the native runner (cli.py calls it once)."""
    reference.register("llamacpp", build)
