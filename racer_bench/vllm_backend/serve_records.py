"""The serving sweep's records and summary, from ``vllm bench serve`` results and our notes.

For each concurrency, ``vllm bench serve`` drives the AR server and the method's server with the
same prompts and saves a result JSON per (concurrency, mode) in the run folder's ``serve/``:
throughput, TTFT / TPOT / ITL / E2EL percentiles, per-request timings and texts, and vLLM's
spec-decode counters (acceptance per position). Each (prompt, concurrency) becomes one line of
``prompts.jsonl`` with both modes' timings and texts, identical-to-AR, scores and, for our
drafters, the request's acceptance from the proposer's step log. The summary takes the
throughput and percentiles from vLLM's results as they are and the rest from the records.
Pure functions: tested without vLLM.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from racer_bench.vllm_backend.step_records import steps_from_notes

MODES = ("baseline", "method")
LATENCIES = ("ttft", "tpot", "itl", "e2el")
PERCENTILES = (50, 95, 99)
RESULTS_DIR = "serve"
RATES = ("duration", "completed", "failed", "total_output_tokens", "request_throughput",
         "output_throughput", "max_concurrent_requests")  # fmt: skip


def result_name(concurrency: int, mode: str) -> str:
    """The file ``vllm bench serve`` writes for one (concurrency, mode)."""
    return f"c{concurrency}_{mode}.json"


def request_prefix(concurrency: int, mode: str) -> str:
    """``--request-id-prefix`` of one (concurrency, mode): request ``i`` is prompt ``i``."""
    return f"c{concurrency}-{mode}-"


def request_index(key: str, prefix: str) -> int | None:
    """Prompt index of a step-log request key: vLLM's completion server names prompt 0 of
    request ``<prefix><i>`` ``cmpl-<prefix><i>-0`` (the log key drops the engine's suffix)."""
    head = f"cmpl-{prefix}"
    if not key.startswith(head):
        return None
    number = key[len(head) :].split("-", 1)[0]
    return int(number) if number.isdigit() else None


def notes_by_index(notes: Mapping[str, list[dict[str, Any]]], prefix: str) -> dict[int, list]:
    """Our proposer's notes of one bench run, by prompt index."""
    out: dict[int, list[dict[str, Any]]] = {}
    for key, request_notes in notes.items():
        i = request_index(key, prefix)
        if i is not None:
            out.setdefault(i, []).extend(request_notes)
    return out


def request_timing(result: Mapping[str, Any], i: int) -> dict[str, Any]:
    """Request ``i`` of a bench result: output length, TTFT, TPOT, E2EL (ms), text, error."""
    n = int(result["output_lens"][i])
    ttft, latency = float(result["ttfts"][i]), float(result["latencies"][i])
    return {"output_len": n, "ttft_ms": ttft * 1e3, "e2el_ms": latency * 1e3,
            "tpot_ms": (latency - ttft) * 1e3 / (n - 1) if n > 1 else None,
            "chunks": len(result["itls"][i]) + 1, "text": result["generated_texts"][i],
            "error": result["errors"][i] or ""}  # fmt: skip


def request_acceptance(notes: Sequence[dict[str, Any]], n_tokens: int) -> dict[str, Any]:
    """Verification steps, MAT and the histogram of accepted draft tokens (bonus excluded) of
    one request, from our proposer's notes (:func:`.step_records.steps_from_notes`)."""
    steps = steps_from_notes(notes, n_tokens)
    hist: dict[int, int] = {}
    for step in steps:
        hist[step["n_accepted"]] = hist.get(step["n_accepted"], 0) + 1
    committed = sum(s["n_accepted"] + 1 for s in steps)
    return {"steps": len(steps), "committed": committed,
            "mat": committed / len(steps) if steps else None,
            "acceptance_hist": {str(k): v for k, v in sorted(hist.items())}}  # fmt: skip


def level_records(
    prompts: Sequence[Any],
    concurrency: int,
    results: Mapping[str, Mapping],
    notes: Mapping[int, list[dict[str, Any]]],
    task: Any,
) -> list[dict[str, Any]]:
    """One record per prompt of one concurrency: both modes' timings and texts, identical,
    scores; the method's acceptance where our proposer left notes."""
    out = []
    for i, prompt in enumerate(prompts):
        record: dict[str, Any] = {"id": f"{prompt.id}@c{concurrency}", "prompt_id": prompt.id,
                                  "category": prompt.category, "index": i,
                                  "concurrency": concurrency}  # fmt: skip
        for mode in MODES:
            record[mode] = request_timing(results[mode], i)
        if i in notes:
            record["method"] |= request_acceptance(notes[i], record["method"]["output_len"])
        record["identical"] = record["method"]["text"] == record["baseline"]["text"]
        record["score"] = task.score(prompt, [record["method"]["text"]])
        record["baseline_score"] = task.score(prompt, [record["baseline"]["text"]])
        record["status"] = "ok" if not (record["method"]["error"] or
                                        record["baseline"]["error"]) else "error"  # fmt: skip
        out.append(record)
    return out


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
    return {"length": result["spec_decode_acceptance_length"],
            "rate": result["spec_decode_acceptance_rate"] / 100.0,
            "per_position": [r / 100.0 for r in
                             result.get("spec_decode_per_position_acceptance_rates", [])],
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
            "mat_request_p10": quantile([r["mat"] for r in rows], 0.1),
            "acceptance_hist": dict(sorted(hist.items(), key=lambda kv: int(kv[0])))}  # fmt: skip


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile, linear between order statistics."""
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def mean_scores(records: Sequence[dict[str, Any]], key: str) -> dict[str, float]:
    """Each score's mean over the records (``score`` or ``baseline_score``)."""
    names = sorted({n for r in records for n in (r.get(key) or {})})
    return {n: statistics.fmean(r[key][n] for r in records if n in (r.get(key) or {}))
            for n in names}  # fmt: skip


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
