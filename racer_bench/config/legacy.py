"""Old records, today's names: the one home of what moved since a run could have been saved.

A saved run config (a manifest's ``config``, a ``.hydra/config.yaml``) names its objects by the
``_target_`` they had when the run was made. Whoever reads old records (resume, the verifier
grid, replay, ``scripts/add_quality.py``, the scheduler settings) maps those names through
:func:`today` before resolving them; nothing else keeps a list of old names.
"""

from __future__ import annotations

from typing import Any

# modules and packages that moved, old dotted name -> today's (their contents did not change)
MOVED_MODULES = {
    # the engine split by job (schedule / verify / fast)
    "racer_bench.engine.acceptance": "racer_bench.engine.schedule.acceptance",
    "racer_bench.engine.cost": "racer_bench.engine.schedule.cost",
    "racer_bench.engine.scheduler": "racer_bench.engine.schedule.scheduler",
    "racer_bench.engine.scheduler_settings": "racer_bench.engine.schedule.settings",
    "racer_bench.engine.verify": "racer_bench.engine.verify.greedy",
    "racer_bench.engine.asd": "racer_bench.engine.verify.asd",
    "racer_bench.engine.sampling": "racer_bench.engine.verify.sampling",
    "racer_bench.engine.native_llama": "racer_bench.engine.fast.llama",
    "racer_bench.engine.small_gemm": "racer_bench.engine.fast.small_gemm",
    "racer_bench.engine.bf16_gemm": "racer_bench.engine.fast.bf16_gemm",
    "racer_bench.engine.amx_probe": "racer_bench.engine.fast.amx_probe",
    "racer_bench.engine.kernel_library": "racer_bench.engine.fast.kernel_library",
    "racer_bench.engine.row_attention": "racer_bench.engine.fast.row_attention",
    "racer_bench.engine.fused_linears": "racer_bench.engine.fast.fused_linears",
    "racer_bench.engine.floor": "racer_bench.engine.fast.floor",
    "racer_bench.engine.engine_choice": "racer_bench.engine.fast.engine_choice",
    "racer_bench.engine.attention": "racer_bench.engine.fast.attention",
    # the bench scripts' libraries left run/
    "racer_bench.run.bench": "racer_bench.bench.common",
    "racer_bench.run.bench_capacity": "racer_bench.bench.racer_capacity_mat",
    "racer_bench.run.bench_forward_cost": "racer_bench.bench.bench_forward_cost",
    "racer_bench.run.bench_load": "racer_bench.bench.bench_load",
    "racer_bench.run.bench_methods": "racer_bench.bench.bench_methods",
    "racer_bench.run.cost_drift": "racer_bench.bench.bench_cost_drift",
    "racer_bench.run.kernel_ab": "racer_bench.bench.bench_kernel_ab",
    "racer_bench.run.layer_phases": "racer_bench.bench.profile_layer_phases",
    # the record format and replay left analysis/
    "racer_bench.analysis.records": "racer_bench.record.folder",
    "racer_bench.analysis.replay": "racer_bench.replay.core",
    "racer_bench.analysis.replay_drafters": "racer_bench.replay.drafters",
    "racer_bench.analysis.replay_runs": "racer_bench.replay.runs",
    # the drafters' shared parts moved under methods/common/
    **{
        f"methods.{name}": f"methods.common.{name}"
        for name in (
            "calibration",
            "datastore",
            "draft_tree",
            "draft_vocab",
            "ngram_index",
            "sam_corpus",
            "suffix_automaton",
            "suffix_tree",
            "heads",
        )
    },
}

# single objects whose name changed, old -> today's
MOVED_OBJECTS = {
    # from before the engine/ package
    "racer_bench.asd.ASDVerifier": "racer_bench.engine.verify.asd.ASDVerifier",
    "racer_bench.verify.GreedyVerifier": "racer_bench.engine.verify.greedy.GreedyVerifier",
    # the scheduler group named scheduler classes before it named settings objects
    "racer_bench.engine.scheduler.FixedScheduler": (
        "racer_bench.engine.schedule.settings.FixedSettings"
    ),
    "racer_bench.engine.scheduler.ConfidenceScheduler": (
        "racer_bench.engine.schedule.settings.ConfidenceSettings"
    ),
    # the loaders were re-exported by racer_bench.models
    **{
        f"racer_bench.models.{name}": f"racer_bench.models.loaders.{name}"
        for name in (
            "load_gemma3",
            "load_hf",
            "load_smollm2",
            "resolve_device",
            "resolve_dtype",
            "tiny_random",
        )
    },
    "racer_bench.engine.native_llama.NativeLlama": "racer_bench.engine.fast.llama.LlamaStack",
}


_TODAY = frozenset(MOVED_MODULES.values())


def today(target: str) -> str:
    """Today's name of a ``_target_`` a record was saved with (unchanged if nothing moved)."""
    if target in MOVED_OBJECTS:
        return MOVED_OBJECTS[target]
    if any(target.startswith(f"{new}.") for new in _TODAY):  # already today's
        return target
    prefix = target.rpartition(".")[0]
    while prefix:  # the longest moved module the target sits in
        if prefix in MOVED_MODULES:
            return MOVED_MODULES[prefix] + target[len(prefix) :]
        prefix = prefix.rpartition(".")[0]
    return target


def retarget(node: Any) -> Any:
    """A saved config (plain JSON) with every ``_target_`` at today's name."""
    if isinstance(node, dict):
        out = {key: retarget(value) for key, value in node.items()}
        target = out.get("_target_")
        if isinstance(target, str):
            out["_target_"] = today(target)
        return out
    if isinstance(node, list):
        return [retarget(value) for value in node]
    return node
