"""The serving sweep's summary (``backend=vllm_serve``): one block per concurrency.

Throughput and latency percentiles are ``vllm bench serve``'s own numbers, read from the result
JSON it saved per (concurrency, mode) in the run folder's ``serve/``; identical-to-AR, accuracy
and our drafters' per-request acceptance come from the prompt records
(racer_bench/vllm_backend/serve_records.py writes both). Pure functions over those files.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from racer_bench.analysis import metrics

MODES = ("baseline", "method")
LATENCIES = ("ttft", "tpot", "itl", "e2el")
PERCENTILES = (50, 95, 99)
RESULTS_DIR = "serve"
RATES = ("duration", "completed", "failed", "total_output_tokens", "request_throughput",
         "output_throughput", "max_concurrent_requests")  # fmt: skip


def result_name(concurrency: int, mode: str) -> str:
    """The file ``vllm bench serve`` writes for one (concurrency, mode)."""
    return f"c{concurrency}_{mode}.json"


def bench_metrics(result: Mapping[str, Any]) -> dict[str, Any]:
    """vLLM's own aggregate numbers of one bench run: throughput and latency percentiles."""
    out = {k: result.get(k) for k in RATES}
    for name in LATENCIES:
        out[f"mean_{name}_ms"] = result.get(f"mean_{name}_ms")
        for p in PERCENTILES:
            out[f"p{p}_{name}_ms"] = result.get(f"p{p}_{name}_ms")
    return out


def spec_acceptance(result: Mapping[str, Any]) -> dict[str, Any] | None:
    """vLLM's spec-decode counters over one bench run (None without speculation)."""
    if "spec_decode_acceptance_length" not in result:
        return None
    # vLLM writes the overall rate in percent but the per-position rates as fractions (they
    # sum to accepted tokens per draft, the acceptance length minus 1)
    return {"length": result["spec_decode_acceptance_length"],
            "rate": result["spec_decode_acceptance_rate"] / 100.0,
            "per_position": list(result.get("spec_decode_per_position_acceptance_rates", [])),
            "drafts": result.get("spec_decode_num_drafts"),
            "draft_tokens": result.get("spec_decode_draft_tokens"),
            "accepted_tokens": result.get("spec_decode_accepted_tokens")}  # fmt: skip


def per_request_acceptance(records: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """MAT averaged per request and per token (committed tokens over all steps), and the
    summed histogram, over the records our proposer left notes for (None: none did)."""
    rows = [r["method"] for r in records if r["method"].get("mat") is not None]
    if not rows:
        return None
    hist: dict[str, int] = {}
    for row in rows:
        for k, v in row["acceptance_hist"].items():
            hist[k] = hist.get(k, 0) + v
    return {"requests": len(rows), "mat_per_request": statistics.fmean(r["mat"] for r in rows),
            "mat_per_token": sum(r["committed"] for r in rows) / sum(r["steps"] for r in rows),
            "mat_request_p10": float(np.quantile([r["mat"] for r in rows], 0.1)),
            "acceptance_hist": dict(sorted(hist.items(), key=lambda kv: int(kv[0])))}  # fmt: skip


def mean_scores(records: Sequence[dict[str, Any]], key: str) -> dict[str, float]:
    """Each score's mean over the records (``score`` or ``baseline_score``)."""
    names = sorted({n for r in records for n in (r.get(key) or {})})
    return {n: metrics.mean_score(records, n, key) for n in names}


def level_summary(records: Sequence[dict[str, Any]], results: Mapping[str, Mapping]) -> dict:
    """One concurrency: both modes' vLLM numbers, the method's gains over AR (output
    throughput; p50 TPOT as AR's over the method's), identical rate, acceptance, accuracy."""
    base, method = (bench_metrics(results[m]) for m in MODES)
    ok = [r for r in records if r["status"] == "ok"]
    return {
        "n_requests": len(records),
        "errors": len(records) - len(ok),
        "baseline": base,
        "method": method,
        "throughput_speedup": ratio(method["output_throughput"], base["output_throughput"]),
        "tpot_speedup_p50": ratio(base["p50_tpot_ms"], method["p50_tpot_ms"]),
        "tpot_speedup_p95": ratio(base["p95_tpot_ms"], method["p95_tpot_ms"]),
        "ttft_ratio_p50": ratio(method["p50_ttft_ms"], base["p50_ttft_ms"]),
        "identical": statistics.fmean(r["identical"] for r in ok) if ok else None,
        "acceptance": spec_acceptance(results["method"]),
        "per_request": per_request_acceptance(ok),
        "accuracy": mean_scores(ok, "score"),
        "baseline_accuracy": mean_scores(ok, "baseline_score"),
    }


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def load_results(run_dir: Path, concurrency: int) -> dict[str, dict[str, Any]]:
    """Both modes' saved bench results of one concurrency."""
    folder = Path(run_dir) / RESULTS_DIR
    return {m: json.loads((folder / result_name(concurrency, m)).read_text(encoding="utf-8"))
            for m in MODES}  # fmt: skip


def summarize_serving(run_dir: Path, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``by_concurrency``: :func:`level_summary` for each concurrency the records hold."""
    levels = sorted({int(r["concurrency"]) for r in records})
    by_level = {}
    for c in levels:
        level = [r for r in records if int(r["concurrency"]) == c]
        by_level[str(c)] = level_summary(level, load_results(run_dir, c))
    identical = [r["identical"] for r in records if r["status"] == "ok"]
    return {"mode": "serve", "concurrency": levels, "by_concurrency": by_level,
            "identical": statistics.fmean(identical) if identical else None,
            "n_prompts": len({r["prompt_id"] for r in records})}  # fmt: skip
