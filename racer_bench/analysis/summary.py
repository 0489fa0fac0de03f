"""Run summaries: the metrics of ``metrics.py`` assembled per run and per category."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from racer_bench.analysis import batches, metrics, quality

Record = dict[str, Any]


def speed_block(records: Sequence[Record], has_baseline: bool) -> dict[str, Any]:
    """Speed and acceptance metrics of the method (and the AR baseline when it ran)."""
    out: dict[str, Any] = {
        "n_prompts": len(records),
        "new_tokens": sum(metrics.new_tokens(r, "method") for r in records),
        "tokens_per_s": metrics.tokens_per_s(records, "method"),
        "mat": metrics.mat(records, "method"),
        "draft_time_share": metrics.draft_time_share(records, "method"),
        "retrieval_hit_rate": metrics.retrieval_hit_rate(records, "method"),
        "retrieval_accept_share": metrics.retrieval_accept_share(records, "method"),
        "draft_efficiency": metrics.draft_efficiency(records, "method"),
        "draft_size_mean": metrics.mean_step_column(records, "n_draft"),
        "draft_depth_mean": metrics.mean_step_column(records, "depth"),
    }
    if has_baseline:
        low, high = metrics.speedup_ci(records)
        out |= {
            "baseline_tokens_per_s": metrics.tokens_per_s(records, "baseline"),
            "speedup": metrics.speedup(records),
            "speedup_ci95": [low, high],
            "speedup_mean_per_prompt": float(np.mean(metrics.per_prompt_speedups(records))),
            "identical": metrics.identical_rate(records),
        }
        per_repeat = metrics.speedup_per_repeat(records)
        if len(per_repeat) > 1:
            out["speedup_per_repeat"] = per_repeat
        step = metrics.mean_step_ms(records, "baseline")
        if step > 0:  # records that time each step (not vLLM's, whose steps carry no time)
            out["ar_step_ms"] = step
    return out | reference_block(records)


# record key of each reference -> the prefix of its summary keys: transformers' generate()
# (reference=generate) and the same GGUF through llama.cpp (reference=llamacpp)
LLAMACPP_REFERENCE = "reference_llamacpp"
REFERENCES = {"reference": "reference", LLAMACPP_REFERENCE: "llamacpp"}


def reference_block(records: Sequence[Record]) -> dict[str, Any]:
    """Every reference the run timed on the same prompts (else empty): :func:`one_reference`."""
    out: dict[str, Any] = {}
    for key, prefix in REFERENCES.items():
        out |= one_reference(records, key, prefix)
    return out


def one_reference(records: Sequence[Record], key: str, prefix: str) -> dict[str, Any]:
    """``<prefix>_tokens_per_s`` of the reference under record ``key``, and with an AR baseline
    how often its output equals our AR loop's (``<prefix>_identical``) and our AR's tok/s over
    its (``ar_vs_<prefix>``)."""
    timed = [r for r in records if metrics.turns(r, key)]
    if not timed:
        return {}
    out = {f"{prefix}_tokens_per_s": metrics.tokens_per_s(timed, key)}
    if any(metrics.turns(r, "baseline") for r in timed):
        out[f"{prefix}_identical"] = metrics.identical_rate(timed, key, "baseline")
        out[f"ar_vs_{prefix}"] = (
            metrics.tokens_per_s(timed, "baseline") / out[f"{prefix}_tokens_per_s"]
        )
    return out


def score_block(records: Sequence[Record], metric: str | None, has_baseline: bool) -> dict:
    """Task score of the method (and of the baseline) under the task's metric name."""
    if not metric:
        return {}
    out = {metric: metrics.mean_score(records, metric)}
    if has_baseline:
        out[f"baseline_{metric}"] = metrics.mean_score(records, metric, "baseline_score")
    return out


def strict_block(records: Sequence[Record], metric: str | None) -> dict[str, Any]:
    """Lossy verifier vs strict greedy with the same drafter on the same prompts (ASD)."""
    paired = [r for r in records if metrics.turns(r, "strict")]
    if not paired:
        return {}
    out: dict[str, Any] = {
        "strict_tokens_per_s": metrics.tokens_per_s(paired, "strict"),
        "strict_mat": metrics.mat(paired, "strict"),
        "gain_vs_strict": metrics.speedup(paired, "method", "strict") - 1.0,
        "decode_gain_vs_strict": metrics.decode_tokens_per_s(paired, "method")
        / metrics.decode_tokens_per_s(paired, "strict")
        - 1.0,
        "divergence": 1.0 - metrics.identical_rate(paired, "method", "strict"),
        "exceptions_per_prompt": float(
            np.mean([sum(metrics.step_column(r, "method", "n_relaxed")) for r in paired])
        ),
        "regret_per_prompt": float(
            np.mean([sum(metrics.step_column(r, "method", "regret")) for r in paired])
        ),
    }
    if metric:
        deltas = [
            r["score"][metric] - r["strict_score"][metric]
            for r in paired
            if metric in (r.get("score") or {}) and metric in (r.get("strict_score") or {})
        ]
        out[f"strict_{metric}"] = metrics.mean_score(paired, metric, "strict_score")
        out["accuracy_delta"] = float(np.mean(deltas)) if deltas else float("nan")
        out["accuracy_delta_ci95"] = list(metrics.bootstrap_ci(deltas))
    return out | quality_block(paired)


GAP_QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


def mean_with_ci(name: str, values: Sequence[float]) -> dict[str, Any]:
    """``name``: the mean over prompts (NaN when none), ``name_ci95``: its bootstrap interval
    over prompts, ``name_n``: how many prompts it covers."""
    mean = float(np.mean(values)) if len(values) else float("nan")
    return {
        name: mean,
        f"{name}_ci95": list(metrics.bootstrap_ci(values)),
        f"{name}_n": len(values),
    }


def quality_block(paired: Sequence[Record]) -> dict[str, Any]:
    """What the lossy verifier changed, per prompt against strict greedy (``quality.py``):
    answer agreement, target log-likelihood gap (with its per-prompt quantiles), first
    divergence; each with a paired bootstrap 95 % interval. Prompts without a measure (older
    records, tasks without answers) are left out of it; none at all gives NaN."""
    gaps = quality.measured([quality.logprob_gap(r) for r in paired])
    regrets = [sum(metrics.step_column(r, "method", "regret")) for r in paired]
    out = mean_with_ci("agreement", quality.measured([quality.agreement(r) for r in paired]))
    out |= mean_with_ci("logprob_gap", gaps)
    if gaps:
        levels = np.quantile(gaps, GAP_QUANTILES).tolist()
        out["logprob_gap_quantiles"] = {
            f"p{q * 100:g}": v for q, v in zip(GAP_QUANTILES, levels, strict=True)
        }
        for mode in ("method", "strict"):
            values = quality.measured([quality.mean_logprob(r, mode) for r in paired])
            out[f"{mode}_logprob"] = float(np.mean(values)) if values else float("nan")
    out |= mean_with_ci("first_divergence", [quality.record_first_divergence(r) for r in paired])
    out["regret_per_prompt_ci95"] = list(metrics.bootstrap_ci(regrets))
    return out


def scheduler_block(records: Sequence[Record], mode: str = "method") -> dict[str, Any]:
    """Confidence-scheduler metrics (empty for runs without predictions, e.g. scheduler=fixed)."""
    if not metrics.calibration_table(records, mode) and math.isnan(
        metrics.predicted_accepted_mean(records)
    ):
        return {}
    sizes: dict[int, int] = {}
    for r in records:
        for n in metrics.step_column(r, mode, "n_draft"):
            sizes[int(n)] = sizes.get(int(n), 0) + 1
    return {
        "candidate_size_mean": metrics.candidate_size_mean(records, mode),
        "predicted_accepted_mean": metrics.predicted_accepted_mean(records, mode),
        "realised_accepted_mean": metrics.realised_accepted_mean(records, mode),
        "calibration_error": metrics.calibration_error(records, mode),
        "tokens_per_cost": metrics.tokens_per_cost(records, mode),
        "draft_size_hist": dict(sorted(sizes.items())),
    }


def summarize(
    records: Sequence[Record],
    metric: str | None,
    has_baseline: bool,
    category_of: Callable[[str], str] = lambda c: c,
) -> dict[str, Any]:
    """The run summary: overall blocks plus the same speed/score blocks per category."""
    ok = [r for r in records if r.get("status") == "ok"]
    summary: dict[str, Any] = {"n_failed": len(records) - len(ok)}
    summary |= speed_block(ok, has_baseline)
    summary |= score_block(ok, metric, has_baseline)
    summary |= strict_block(ok, metric)
    summary |= scheduler_block(ok)
    summary["acceptance_hist"] = metrics.acceptance_histogram(ok)
    categories: dict[str, list[Record]] = {}
    for r in ok:
        categories.setdefault(r["category"], []).append(r)
        merged = category_of(r["category"])  # e.g. Spec-Bench's 8 MT-Bench ones -> multi_turn
        if merged != r["category"]:
            categories.setdefault(merged, []).append(r)
    if len(categories) > 1:
        summary["per_category"] = {
            name: speed_block(rs, has_baseline) | score_block(rs, metric, has_baseline)
            for name, rs in sorted(categories.items())
        }
    return summary


def summarize_batches(records: Sequence[Record], metric: str | None, depth: int) -> dict[str, Any]:
    """A ``backend=vllm`` run: the smallest batch size's summary at the top, every batch size's
    under ``by_batch``. Each block is :func:`summarize`'s plus ``acceptance_at_least`` up to
    ``depth`` positions, the speedup's interval over timed batches with their count
    (:func:`racer_bench.analysis.batches.batch_block`, which replaces the per-prompt interval),
    and the per-request acceptance beside the pooled ``mat`` (:func:`batch_acceptance`)."""
    groups: dict[int, list[Record]] = {}
    for record in records:
        groups.setdefault(int(record["batch_size"]), []).append(record)
    blocks = {}
    for b, rs in sorted(groups.items()):
        ok = [r for r in rs if r.get("status") == "ok"]
        blocks[b] = (
            summarize(rs, metric, has_baseline=True)
            | {"acceptance_at_least": metrics.acceptance_at_least(ok, "method", depth)}
            | batches.batch_block(ok)
            | batch_acceptance(ok)
        )
    if not blocks:
        return {"n_failed": 0, "by_batch": {}}
    return dict(blocks[min(blocks)]) | {"by_batch": {str(b): blk for b, blk in blocks.items()}}


REQUEST_QUANTILES = (0.0, 0.25, 0.5, 0.75, 1.0)


def batch_acceptance(records: Sequence[Record]) -> dict[str, Any]:
    """``mat_per_request``: the mean over requests (prompt lines) of each one's own MAT, with
    its interval over requests and their quantiles, beside the pooled ``mat`` (every step of
    every request counted once, so a request weighs by its steps): where the two part, a few
    requests carry the pooled mean."""
    mats = batches.request_mats(records)
    out = mean_with_ci("mat_per_request", mats)
    if mats:
        levels = np.quantile(mats, REQUEST_QUANTILES).tolist()
        out["mat_per_request_quantiles"] = {
            f"p{q * 100:g}": v for q, v in zip(REQUEST_QUANTILES, levels, strict=True)
        }
    return out
