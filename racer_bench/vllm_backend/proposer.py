"""The proposer vLLM builds from ``speculative_config={"method": "custom_class", ...}``.

vLLM constructs it in its worker process with the ``VllmConfig`` alone, so which drafter to run
travels in the environment variable :data:`SPEC_ENV` (JSON written by :mod:`.engines`): the
method's resolved Hydra node, the draft length, the generation length and the path of the step
log. Each step's per-request :class:`~racer_bench.vllm_backend.adapter.StepNote` is appended to
that log, one JSON line per call, so the runner can read what every drafter did.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from racer_bench.config.construct import constructor_node
from racer_bench.vllm_backend.adapter import DrafterPool, StepNote
from racer_bench.vllm_backend.budget import BatchBudget

SPEC_ENV = "RACER_BENCH_VLLM_PROPOSER"
CLASS_PATH = "racer_bench.vllm_backend.proposer.RacerBenchProposer"


def drafter_factory(method: dict[str, Any], vocab_size: int) -> Any:
    """A function building a fresh drafter from a resolved method node (``_partial_`` style)."""
    node = constructor_node(OmegaConf.create(method))
    return lambda: instantiate(node)(vocab_size=vocab_size)


class RacerBenchProposer:
    """Our drafters behind vLLM's ``custom_class`` proposer interface."""

    def __init__(self, vllm_config: Any) -> None:
        spec = json.loads(os.environ[SPEC_ENV])
        make = drafter_factory(spec["method"], vllm_config.model_config.get_vocab_size())
        first = make()
        self.topk = int(first.needs.topk)
        k = int(vllm_config.speculative_config.num_speculative_tokens)
        budget = BatchBudget() if spec.get("draft_length") == "confidence" else None
        self.pool = DrafterPool(make, k, int(spec.get("max_draft", 256)),
                                spec.get("max_new_tokens"), budget)  # fmt: skip
        self.pool.idle.append(first)
        self.log_path = Path(spec["log"]) if spec.get("log") else None
        self.batch: Any = None
        self.rows: dict[str, torch.Tensor] = {}

    def load_model(self, *args: Any, **kwargs: Any) -> None:
        """vLLM's CPU runner calls this unconditionally; there is no draft model to load."""

    def observe_sample(self, input_batch: Any, logits: torch.Tensor, spec: Any) -> None:
        """Called by :mod:`.plugin` before sampling: the batch and each request's top-k rows.

        ``logits`` is FloatTensor[R, V]: per request in batch order ``num_draft_tokens + 1`` rows
        when drafts are verified (``spec`` set), else one row.
        """
        self.batch = input_batch
        if not self.topk:
            return
        req_ids = list(input_batch.req_ids)
        counts = [n + 1 for n in spec.num_draft_tokens] if spec is not None else [1] * len(req_ids)
        top = logits.topk(self.topk, dim=-1).indices.cpu()
        self.rows = dict(zip(req_ids, torch.split(top, counts), strict=False))

    def propose(
        self,
        sampled_token_ids: list[list[int]],
        num_tokens_no_spec: Any,
        token_ids_cpu: Any,
        slot_mappings: Any = None,
    ) -> list[list[int]]:
        """One chain per batch row (empty for rows that sampled nothing: partial prefills)."""
        if self.batch is None:
            raise RuntimeError("the racer_bench vLLM plugin is not loaded: reinstall racer_bench "
                               "(pip install -e .) so vLLM finds its entry point")  # fmt: skip
        req_ids = list(self.batch.req_ids)
        self._tick(req_ids, sampled_token_ids)
        chains: list[list[int]] = []
        notes: dict[str, StepNote] = {}
        for i, sampled in enumerate(sampled_token_ids):
            if not sampled:
                chains.append([])
                continue
            n = int(num_tokens_no_spec[i])
            context = token_ids_cpu[i, :n].tolist()
            prompt_len = int(self.batch.num_prompt_tokens[i])
            chain, notes[req_ids[i]] = self.pool.propose(
                req_ids[i], context, prompt_len, self.rows.get(req_ids[i])
            )
            chains.append(chain)
        if self.pool.budget is not None:
            chains = self._cut(req_ids, chains, notes)
        self.pool.release_missing(set(req_ids))
        self.rows = {}
        self._log([{"r": r, **note.as_dict()} for r, note in notes.items()])
        return chains

    def _tick(self, req_ids: list[str], sampled_token_ids: list[list[int]]) -> None:
        """Clock the step that just ended for the budget's cost fit (pure decode steps only:
        every request sampled and none is new)."""
        if self.pool.budget is None:
            return
        pure = all(sampled_token_ids) and all(r in self.pool.live for r in req_ids)
        self.pool.budget.tick(time.perf_counter(), frozenset(req_ids), pure)

    def _cut(
        self, req_ids: list[str], chains: list[list[int]], notes: dict[str, StepNote]
    ) -> list[list[int]]:
        """The budget's cut of this step's chains (rows that sampled nothing stay empty)."""
        assert self.pool.budget is not None
        rows = [r if r in notes else None for r in req_ids]
        estimates = [self.pool.live[r].estimate if r is not None else None for r in rows]
        kept = self.pool.budget.cut(estimates)
        return [self.pool.cut(r, k, notes[r]) if r is not None else chain
                for r, k, chain in zip(rows, kept, chains, strict=True)]  # fmt: skip

    def _log(self, notes: list[dict[str, Any]]) -> None:
        if self.log_path is None or not notes:
            return
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write("".join(json.dumps(n) + "\n" for n in notes))
