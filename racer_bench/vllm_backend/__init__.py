"""The vLLM backend: the same drafters and tasks inside vLLM's engine, at any batch size.

Beside :mod:`racer_bench.engine` (the native batch-1 loop), nothing here is imported by the
engine, and only :mod:`racer_bench.vllm_backend.offline`, :mod:`.serving`, :mod:`.plugin` and
:mod:`.step_profile` import vLLM itself, so the pure parts (chain projection, per-request drafter
state, the engines' set-up) are tested without it.

* :mod:`.chains` -- a draft tree projected onto the chain vLLM verifies.
* :mod:`.adapter` -- one drafter state per vLLM request id, fed the tokens vLLM committed.
* :mod:`.proposer` -- the ``custom_class`` proposer vLLM constructs in its worker.
* :mod:`.plugin` -- a vLLM general plugin that hands the proposer the request ids and the
  target's top-k at the verified positions (vLLM's ``custom_class`` call passes neither).
* :mod:`.compat` -- the vLLM versions the plugin supports, checked before it patches vLLM.
* :mod:`.cpu` -- the engines' OpenMP thread binding and dtype on a CPU.
* :mod:`.batching` -- which batches are timed at a batch size (passes until ``min_batches``).
* :mod:`.engines` -- what both backends set up before an engine starts: config checks, the
  engines' settings and environment, and :func:`~.engines.plan_pair`, one plan for both pairs.
* :mod:`.offline` -- builds ``vllm.LLM`` engines and runs a task at each batch size.
"""
