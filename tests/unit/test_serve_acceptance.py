"""vLLM's per-position acceptance rates, as its bench writes them: fractions, while the overall
rate is in percent. Checked on a result file of a real serving run and on every curated
serving summary: the per-position rates add up to accepted tokens per draft."""

from __future__ import annotations

import json
import math

import pytest

from racer_bench.analysis.serve_summary import spec_acceptance
from tests.conftest import REPO

CURATED = REPO / "results" / "curated"
REAL_RESULT = CURATED / "vllm_serve_humaneval" / "racer" / "serve" / "c1_method.json"
SERVE_SUMMARIES = sorted(
    p for p in CURATED.rglob("summary.json")
    if json.loads(p.read_text(encoding="utf-8")).get("mode") == "serve"
)  # fmt: skip


def test_a_real_vllm_result_reads_as_fractions() -> None:
    result = json.loads(REAL_RESULT.read_text(encoding="utf-8"))
    got = spec_acceptance(result)
    assert got is not None
    per_draft = result["spec_decode_accepted_tokens"] / result["spec_decode_num_drafts"]
    assert math.isclose(sum(got["per_position"]), per_draft, rel_tol=1e-9)
    assert math.isclose(got["length"] - 1, per_draft, rel_tol=1e-9)
    rate = result["spec_decode_accepted_tokens"] / result["spec_decode_draft_tokens"]
    assert math.isclose(got["rate"], rate, rel_tol=1e-9)
    assert all(0 <= r <= 1 for r in got["per_position"])


def test_there_are_curated_serving_summaries() -> None:
    assert SERVE_SUMMARIES


@pytest.mark.parametrize("path", SERVE_SUMMARIES, ids=lambda p: p.parent.name)
def test_per_position_rates_sum_to_accepted_per_draft(path) -> None:
    summary = json.loads(path.read_text(encoding="utf-8"))
    for level in summary["by_concurrency"].values():
        acceptance = level.get("acceptance")
        if not acceptance:
            continue
        per_draft = acceptance["accepted_tokens"] / acceptance["drafts"]
        assert math.isclose(sum(acceptance["per_position"]), per_draft, rel_tol=1e-6)
