"""The serving sweep's records, from ``vllm bench serve`` results and our proposer's notes.

For each concurrency, ``vllm bench serve`` drives the AR server and the method's server with the
same prompts and saves a result JSON per (concurrency, mode) in the run folder's ``serve/``:
throughput, TTFT / TPOT / ITL / E2EL percentiles, per-request timings and texts, and vLLM's
spec-decode counters (acceptance per position). Each (prompt, concurrency) becomes one line of
``prompts.jsonl`` with both modes' timings and texts, identical-to-AR, scores and, for our
drafters, the request's acceptance from the proposer's step log; the summary is
:mod:`racer_bench.analysis.serve_summary`'s. Pure functions: tested without vLLM.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from racer_bench.analysis.serve_summary import MODES
from racer_bench.vllm_backend.step_records import steps_from_notes


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
