"""A vLLM general plugin: shows our proposer what vLLM's ``custom_class`` call leaves out.

vLLM 0.32 calls a ``custom_class`` proposer with each batch row's tokens only: no request ids
and no logits. The plugin (entry point ``vllm.general_plugins: racer_bench``, loaded by vLLM in
every engine and worker process before the model runner is built) wraps the runner's
``_sample`` so that, when the runner's drafter is ours, the drafter first sees the batch (for
request ids and prompt lengths) and the target's top-k at every sampled row. With any other
proposer, or none, the wrapper only delegates. Nothing else of vLLM is changed.

``_sample`` is private, so the wrapper is guarded: before patching, the installed vLLM must be in
:data:`.compat.SUPPORTED_VLLM` (or the escape hatch set) and ``_sample`` must take exactly
:data:`SAMPLE_PARAMETERS`. When our proposer runs in the process (:data:`.proposer.SPEC_ENV` set)
a failed check raises its one-line error; in any other process vLLM is left unpatched with a
warning, so another program's vLLM in the same environment keeps working.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
from collections.abc import Callable
from typing import Any

from racer_bench.vllm_backend.compat import UnsupportedVllm, check_version, supported_text

PATCHED = "_racer_bench_patched"
PATCHED_METHOD = "vllm.v1.worker.gpu_model_runner.GPUModelRunner._sample"
# The parameters of the patched method in the supported vLLM (the wrapper below passes them on).
SAMPLE_PARAMETERS = ("self", "logits", "spec_decode_metadata")
NEEDS_UPDATE = "this vLLM needs the plugin updated (racer_bench/vllm_backend/plugin.py)"

log = logging.getLogger(__name__)


def check_signature(method: Callable[..., Any], version: str) -> None:
    """Raise :class:`UnsupportedVllm` if ``method`` does not take :data:`SAMPLE_PARAMETERS`."""
    found = tuple(inspect.signature(method).parameters)  # follows __wrapped__ once patched
    if found != SAMPLE_PARAMETERS:
        raise UnsupportedVllm(f"vLLM {version}: {PATCHED_METHOD} takes ({', '.join(found)}), "
                              f"but racer_bench's plugin wraps ({', '.join(SAMPLE_PARAMETERS)}) "
                              f"as in {supported_text()}; {NEEDS_UPDATE}")  # fmt: skip


def runner_class(version: str) -> type:
    """vLLM's ``GPUModelRunner`` (the CPU runner subclasses it), which must have ``_sample``."""
    try:
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner
    except ImportError as error:
        raise UnsupportedVllm(f"vLLM {version}: {PATCHED_METHOD} does not import ({error}); "
                              f"{NEEDS_UPDATE}") from error  # fmt: skip
    if not callable(getattr(GPUModelRunner, "_sample", None)):
        raise UnsupportedVllm(f"vLLM {version}: {PATCHED_METHOD} does not exist; {NEEDS_UPDATE}")
    return GPUModelRunner


def check_installed() -> str | None:
    """Check the installed vLLM (version, then the patched signature) before patching it.

    Returns the escape hatch's warning line, if any; raises :class:`UnsupportedVllm` (one line).
    """
    import vllm

    warning = check_version(vllm.__version__)
    check_signature(runner_class(vllm.__version__)._sample, vllm.__version__)
    return warning


def register() -> None:
    """Entry point: wrap ``GPUModelRunner._sample`` once per process (CPU runner included)."""
    try:
        warning = check_installed()
    except UnsupportedVllm as error:
        from racer_bench.vllm_backend.proposer import SPEC_ENV

        if SPEC_ENV in os.environ:  # our proposer runs here and would miss the wrapper
            raise
        log.warning("racer_bench's vLLM plugin left vLLM unpatched: %s", error)
        return
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    original = GPUModelRunner._sample
    if getattr(original, PATCHED, False):
        return
    if warning is not None:
        log.warning(warning)

    @functools.wraps(original)
    def _sample(self: Any, logits: Any, spec_decode_metadata: Any) -> Any:
        observe = getattr(getattr(self, "drafter", None), "observe_sample", None)
        if observe is not None and logits is not None:
            observe(self.input_batch, logits, spec_decode_metadata)
        return original(self, logits, spec_decode_metadata)

    setattr(_sample, PATCHED, True)
    GPUModelRunner._sample = _sample
