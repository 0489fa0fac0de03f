"""Speed at several batch sizes (``backend=vllm`` runs) beside the native loop's batch 1.

Reads run folders only: each vLLM run's ``by_batch`` summary blocks and each native run's
summary, matched by the method key of their manifests, so a table or figure is regenerated
from committed records alone.

The summary's per-batch-size statistics are here too (:func:`batch_block`,
:func:`request_mats`). Inside vLLM a batch is what is timed: each prompt line gets a share
of its batch's wall time by its tokens, so every line of a batch has about the batch's speedup,
and the unit the speedup's interval resamples is the timed batch, not the prompt. A batch is a
(pass, batch within the pass) pair: a repeated pass over the prompts (``backend.min_batches``)
times batches of its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from racer_bench.analysis import metrics
from racer_bench.record import folder as run_records


@dataclass
class MethodSpeeds:
    """One method: its vLLM blocks per batch size and its native batch-1 summary (if run)."""

    method: str
    label: str
    by_batch: dict[int, dict[str, Any]] = field(default_factory=dict)
    native: dict[str, Any] | None = None


def draft_length(manifest: dict[str, Any]) -> str:
    """The draft length rule a vLLM run used (records before the setting: ``fixed``)."""
    inside = (manifest.get("backend") or {}).get("inside_vllm") or {}
    if "draft_length" in inside:
        return str(inside["draft_length"])
    backend = (manifest.get("config") or {}).get("backend") or {}
    return str(backend.get("draft_length", "fixed"))


def load_runs(vllm_runs: Sequence[Path], native_runs: Sequence[Path]) -> list[MethodSpeeds]:
    """Methods in the order their vLLM runs are given; native runs join by method key."""
    rows: dict[str, MethodSpeeds] = {}
    for run in vllm_runs:
        manifest, summary = _read(run)
        key = str(manifest.get("method"))
        rule = draft_length(manifest)
        if rule != "fixed":  # beside the same method's whole-chain row
            key += f" ({rule})"
        blocks = {int(b): blk for b, blk in summary["by_batch"].items()}
        rows[key] = MethodSpeeds(key, summary.get("label") or key, blocks)
    for run in native_runs:
        manifest, summary = _read(run)
        key = str(manifest.get("method"))
        if key in rows:  # per-position acceptance from the records, as for the vLLM runs
            depth = max(len(b.get("acceptance_at_least", [])) for b in rows[key].by_batch.values())
            records = [r for r in run_records.load_prompts(run) if r.get("status") == "ok"]
            rows[key].native = summary | {
                "acceptance_at_least": metrics.acceptance_at_least(records, "method", depth or 5)
            }
    return list(rows.values())


def _read(run: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    return run_records.read_json(run / run_records.MANIFEST_FILE), run_records.read_json(
        run / run_records.SUMMARY_FILE
    )


def batch_key(record: dict[str, Any]) -> tuple[int, int]:
    """The timed batch of a vLLM prompt line: (pass, batch within the pass)."""
    return int(record.get("repeat", 0)), int(record["batch"])


def timed_batches(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each timed batch as one record whose turns are those of its prompt lines (both modes),
    in run order, so :mod:`.metrics` computes a batch's tokens, times and speedup as a prompt's."""
    groups: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault(batch_key(record), []).append(record)
    return [{"batch": list(key), "n_prompts": len(rs),
             **{mode: {"turns": [t for r in rs for t in metrics.turns(r, mode)]}
                for mode in ("method", "baseline")}}
            for key, rs in sorted(groups.items())]  # fmt: skip


def batch_block(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A batch size's speedup interval over its timed batches (bootstrap: batches drawn with
    replacement, the speedup of their summed tokens and times), and how many batches it rests on
    (``n_batches``; ``n_full_batches`` of them at the largest size, the others a pass's partial
    last batch). Replaces the per-prompt interval, which treats the lines of one batch, timed
    together, as independent draws. Empty without records."""
    batches = timed_batches(records)
    if not batches:
        return {}
    largest = max(b["n_prompts"] for b in batches)
    low, high = metrics.speedup_ci(batches)
    return {"speedup_ci95": [low, high], "speedup_ci95_unit": "batch",
            "n_batches": len(batches),
            "n_full_batches": sum(b["n_prompts"] == largest for b in batches),
            "n_passes": len({b["batch"][0] for b in batches}),
            "speedup_per_batch": [metrics.speedup([b]) for b in batches]}  # fmt: skip


def request_mats(records: Sequence[dict[str, Any]]) -> list[float]:
    """Each prompt line's own MAT (committed tokens per verification step of that request), in
    record order; lines without a verification step are left out."""
    return [m for m in (metrics.mat([r]) for r in records) if not math.isnan(m)]


def batch_sizes(rows: Sequence[MethodSpeeds]) -> list[int]:
    return sorted({b for r in rows for b in r.by_batch})


def _f(value: Any, pattern: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return pattern.format(value)


def _speed_cell(block: dict[str, Any] | None) -> str:
    """``tok/s · speedup [CI] · MAT`` of a summary block."""
    if not block:
        return "-"
    ci = block.get("speedup_ci95") or [None, None]
    interval = f" [{_f(ci[0], '{:.2f}')}, {_f(ci[1], '{:.2f}')}]" if ci[0] is not None else ""
    if interval and block.get("n_batches"):  # an interval over timed batches says how many
        interval += f" ({block['n_batches']} batches)"
    return (f"{_f(block.get('tokens_per_s'), '{:.1f}')} · "
            f"**{_f(block.get('speedup'), '{:.2f}x')}**{interval} · "
            f"{_f(block.get('mat'), '{:.2f}')}")  # fmt: skip


def speed_table(rows: Sequence[MethodSpeeds]) -> str:
    """Markdown: a row per method, a column per batch size, then the native batch 1."""
    sizes = batch_sizes(rows)
    head = ["method (inside vLLM)", *(f"vLLM batch {b}" for b in sizes), "native batch 1",
            "identical (vLLM b=1 / native)"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r.label, *(_speed_cell(r.by_batch.get(b)) for b in sizes), _speed_cell(r.native)]
        first = r.by_batch.get(min(sizes)) if sizes else None
        cells.append(f"{_identical(first)} / {_identical(r.native)}")
        lines.append("| " + " | ".join(cells) + " |")
    ar = ["vLLM AR (no speculation)", *(_f(_ar(rows, b), "{:.1f}") for b in sizes),
          _f(_native_ar(rows), "{:.1f}"), ""]  # fmt: skip
    lines.append("| " + " | ".join(ar) + " |")
    return "\n".join(lines)


def _identical(block: dict[str, Any] | None) -> str:
    if not block or block.get("identical") is None:
        return "-"
    n = block.get("n_prompts", 0)
    return f"{round(block['identical'] * n)}/{n}"


def _ar(rows: Sequence[MethodSpeeds], b: int) -> float:
    """vLLM AR tok/s at batch b over every run (token-weighted mean of the runs' AR)."""
    blocks = [r.by_batch[b] for r in rows if b in r.by_batch]
    return _weighted(blocks)


def _native_ar(rows: Sequence[MethodSpeeds]) -> float:
    return _weighted([r.native for r in rows if r.native])


def _weighted(blocks: Sequence[dict[str, Any]]) -> float:
    """Total AR tokens / total AR seconds over summary blocks (from tok/s and token counts)."""
    tokens = seconds = 0.0
    for blk in blocks:
        speed = blk.get("baseline_tokens_per_s")
        n = blk.get("new_tokens")  # lossless runs: the AR output has the same tokens
        if speed and n:
            tokens += n
            seconds += n / speed
    return tokens / seconds if seconds else float("nan")


def acceptance_table(rows: Sequence[MethodSpeeds], depth: int) -> str:
    """Markdown: per-position acceptance at vLLM batch 1 and in the native loop."""
    head = ["method", "where", *(f">= {k}" for k in range(1, depth + 1))]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        first = r.by_batch.get(min(r.by_batch)) if r.by_batch else None
        for where, block in (("vLLM b=1", first), ("native", r.native)):
            values = (block or {}).get("acceptance_at_least") or []
            cells = [_f(v, "{:.2f}") for v in values[:depth]] + ["-"] * (depth - len(values))
            lines.append("| " + " | ".join([r.label, where, *cells]) + " |")
    return "\n".join(lines)


def plot_speedups(rows: Sequence[MethodSpeeds], path: Path) -> Path:
    """Speedup over vLLM's AR against batch size, one line per method, native batch 1 beside."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, r in enumerate(rows):
        sizes = sorted(r.by_batch)
        color = f"C{i}"
        ax.plot(sizes, [r.by_batch[b].get("speedup") for b in sizes], "o-", color=color,
                label=r.label)  # fmt: skip
        if r.native and r.native.get("speedup") is not None:
            ax.plot([1], [r.native["speedup"]], marker="*", markersize=13, color=color,
                    linestyle="none")  # fmt: skip
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xscale("log", base=2)
    sizes = batch_sizes(rows)
    ax.set_xticks(sizes, [str(b) for b in sizes])
    ax.set_xlabel("batch size (requests per llm.generate call)")
    ax.set_ylabel("speedup over AR at the same batch size")
    ax.set_title("inside vLLM (lines) vs native loop at batch 1 (stars)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def ar_agreement(vllm_run: Path, native_run: Path) -> tuple[int, int]:
    """(prompts whose AR output is the same token for token, prompts in both): vLLM's AR at
    batch 1 against our loop's AR. Two engines' float32 kernels may round differently."""
    native = {r["id"]: _tokens(r, "baseline") for r in run_records.load_prompts(native_run)}
    same = total = 0
    for record in run_records.load_prompts(vllm_run):
        if record.get("batch_size") != 1 or record.get("prompt_id") not in native:
            continue
        if record.get("repeat", 0):  # a repeated pass asks the same prompt again
            continue
        total += 1
        same += _tokens(record, "baseline") == native[record["prompt_id"]]
    return same, total


def _tokens(record: dict[str, Any], mode: str) -> list[list[int]]:
    return [t["tokens"] for t in metrics.turns(record, mode)]
