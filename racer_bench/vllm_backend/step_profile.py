"""Where vLLM's decode step goes: a torch-profiler trace of plain AR decoding, split per step.

vLLM's model runner marks its phases (``gpu_model_runner: preprocess / forward / postprocess /
sample / bookkeep``) when ``VLLM_CUSTOM_SCOPES_FOR_PROFILING=1``. A decode step is the span
from one ``forward`` mark to the next; its time outside the marks is the engine's own loop
(scheduling, inputs and outputs between processes). Inside ``forward`` the top-level operators
are summed by kind: linear layers (GEMMs), attention, the rest. Medians over the decode steps
(the prefill step is an outlier the median ignores). The trace parsing is pure and tested on a
small synthetic trace; :func:`profile_decode` runs vLLM.
"""

from __future__ import annotations

import gzip
import itertools
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MARK = "gpu_model_runner: "
PHASES = ("preprocess", "forward", "postprocess", "sample", "bookkeep")
LINEAR = ("linear", "addmm", "aten::mm", "matmul", "gemm", "onednn")
ATTENTION = ("attention", "attn", "paged", "sdpa")


def load_events(path: Path) -> list[dict[str, Any]]:
    """The complete ("X") events of a Chrome trace (``.json`` or ``.json.gz``)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    return [e for e in events if e.get("ph") == "X" and "dur" in e]


def op_kind(name: str) -> str:
    """``linear``, ``attention`` or ``other`` for an operator name."""
    lowered = name.lower()
    if any(k in lowered for k in ATTENTION):
        return "attention"
    if any(k in lowered for k in LINEAR):
        return "linear"
    return "other"


def top_level(ops: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Operators not nested inside another operator of the same thread."""
    out: list[dict[str, Any]] = []
    ends: dict[Any, float] = {}
    for op in sorted(ops, key=lambda e: (e["ts"], -e["dur"])):
        thread = (op.get("pid"), op.get("tid"))
        if op["ts"] >= ends.get(thread, float("-inf")):
            out.append(op)
            ends[thread] = op["ts"] + op["dur"]
    return out


def steps(events: Sequence[dict[str, Any]]) -> list[dict[str, float]]:
    """Per decode step (µs): its span, each phase, the loop outside the phases, and the
    forward's top-level operators by kind."""
    marks = sorted((e for e in events if e["name"].startswith(MARK)), key=lambda e: e["ts"])
    forwards = [m for m in marks if m["name"] == MARK + "forward"]
    ops = top_level([e for e in events if e.get("cat") == "cpu_op"])
    out = []
    for here, after in itertools.pairwise(forwards):
        start, stop = here["ts"], after["ts"]
        step = {"span": stop - start}
        for phase in PHASES:
            step[phase] = sum(m["dur"] for m in marks
                              if m["name"] == MARK + phase and start <= m["ts"] < stop)  # fmt: skip
        step["outside_phases"] = step["span"] - sum(step[p] for p in PHASES)
        inside = [o for o in ops if start <= o["ts"] < start + here["dur"]]
        for kind in ("linear", "attention", "other"):
            step[f"forward_{kind}"] = sum(o["dur"] for o in inside if op_kind(o["name"]) == kind)
        step["forward_between_ops"] = here["dur"] - sum(o["dur"] for o in inside)
        out.append(step)
    return out


def breakdown(events: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Median ms of every part over the decode steps, and how many steps."""
    rows = steps(events)
    if not rows:
        raise ValueError("no decode steps in the trace (was VLLM_CUSTOM_SCOPES_FOR_PROFILING=1?)")
    medians = {k: statistics.median(r[k] for r in rows) / 1e3 for k in rows[0]}
    return {"steps": len(rows), "median_ms": medians}


def newest_trace(folder: Path) -> Path:
    """The most recent trace file vLLM's profiler wrote under ``folder``."""
    traces = [p for p in folder.rglob("*") if p.name.endswith((".json", ".json.gz"))]
    if not traces:
        raise FileNotFoundError(f"no trace under {folder}")
    return max(traces, key=lambda p: p.stat().st_mtime)


def profile_decode(llm: Any, prompt_ids: Sequence[int], batch: int, max_tokens: int) -> None:
    """Greedy AR decoding of ``batch`` copies of a prompt under vLLM's profiler (the engine
    must have been built with a torch ``profiler_config``)."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
    prompts = [TokensPrompt(prompt_token_ids=list(prompt_ids)) for _ in range(batch)]
    llm.start_profile()
    llm.generate(prompts, params, use_tqdm=False)
    llm.stop_profile()
