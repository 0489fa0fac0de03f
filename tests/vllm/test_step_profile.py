"""The vLLM step profile's trace parsing, on a synthetic Chrome trace (no vLLM)."""

from __future__ import annotations

import gzip
import json

import pytest

from racer_bench.vllm_backend import step_profile as sp


def mark(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "user_annotation", "name": sp.MARK + name, "ts": ts, "dur": dur,
            "pid": 1, "tid": 1}  # fmt: skip


def op(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1}


def step_events(t0: float) -> list[dict]:
    """One 1000 µs step: preprocess 50, forward 600 (linear 400 with a nested mm, attention
    100, other 50, 50 between ops), sample 100, 250 outside the phases."""
    return [mark("preprocess", t0 - 50, 50), mark("forward", t0, 600),
            op("aten::linear", t0, 400), op("aten::mm", t0 + 10, 300),  # nested: not counted
            op("_C::paged_attention_v1", t0 + 400, 100), op("aten::add", t0 + 500, 50),
            mark("sample", t0 + 600, 100)]  # fmt: skip


def test_a_step_splits_into_phases_the_loop_and_operator_kinds(tmp_path):
    events = [e for t0 in (0, 1000, 2000, 3000) for e in step_events(t0)]
    path = tmp_path / "trace.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": [*events, {"ph": "M", "name": "meta"}]}, f)
    result = sp.breakdown(sp.load_events(path))
    assert result["steps"] == 3  # spans between 4 forward marks
    ms = result["median_ms"]
    assert ms["span"] == pytest.approx(1.0)
    assert ms["forward"] == pytest.approx(0.6) and ms["sample"] == pytest.approx(0.1)
    assert ms["preprocess"] == pytest.approx(0.05)  # the next step's, inside this span
    assert ms["outside_phases"] == pytest.approx(0.25)
    assert ms["forward_linear"] == pytest.approx(0.4)
    assert ms["forward_attention"] == pytest.approx(0.1)
    assert ms["forward_other"] == pytest.approx(0.05)
    assert ms["forward_between_ops"] == pytest.approx(0.05)


def test_operator_kinds_and_a_trace_without_marks():
    assert sp.op_kind("aten::addmm") == "linear" and sp.op_kind("_C::onednn_mm") == "linear"
    assert sp.op_kind("torch_sdpa") == "attention" and sp.op_kind("aten::silu") == "other"
    with pytest.raises(ValueError, match="VLLM_CUSTOM_SCOPES_FOR_PROFILING"):
        sp.breakdown([op("aten::add", 0, 1)])
