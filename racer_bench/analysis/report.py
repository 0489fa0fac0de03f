"""Human-readable run summaries (terminal tables)."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.table import Table

HEADLINE = [
    ("baseline_tokens_per_s", "AR tok/s", "{:.2f}"),
    ("tokens_per_s", "method tok/s", "{:.2f}"),
    ("speedup", "speedup", "{:.2f}x"),
    ("mat", "MAT", "{:.2f}"),
    ("draft_time_share", "draft time", "{:.1%}"),
    ("retrieval_hit_rate", "retrieval hit", "{:.1%}"),
]


def fmt(value: Any, pattern: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return pattern.format(value)


# transformers generate() and llama.cpp on the same prompts, shown where the run measured them
# (reference=generate, reference=llamacpp)
REFERENCE_COLUMN = ("reference_tokens_per_s", "generate() tok/s", "{:.2f}")
LLAMACPP_COLUMN = ("llamacpp_tokens_per_s", "llama.cpp tok/s", "{:.2f}")


def headline(summary: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The table's columns: :data:`HEADLINE`, with each reference's tok/s where it was measured."""
    measured = [c for c in (REFERENCE_COLUMN, LLAMACPP_COLUMN) if c[0] in summary]
    return [*HEADLINE[:3], *measured, *HEADLINE[3:]]


def summary_table(summary: dict[str, Any]) -> Table:
    """One row overall, then one row per category when the task has several."""
    table = Table(
        title=f"{summary.get('n_prompts', 0)} prompts ({summary.get('n_failed', 0)} failed)"
    )
    table.add_column("")
    columns = headline(summary)
    for _, label, _ in columns:
        table.add_column(label, justify="right")
    table.add_column("identical", justify="right")
    scores = [summary["metric"]] if summary.get("metric") in summary else []
    for s in scores:
        table.add_column(s, justify="right")
    rows = [("overall", summary), *summary.get("per_category", {}).items()]
    for name, block in rows:
        cells = [fmt(block.get(key), pattern) for key, _, pattern in columns]
        n = block.get("n_prompts", 0)
        identical = block.get("identical")
        cells.append("-" if identical is None else f"{round(identical * n)}/{n}")
        cells += [fmt(block.get(s), "{:.3f}") for s in scores]
        table.add_row(name, *cells)
    return table


def setting_lines(summary: dict[str, Any]) -> list[str]:
    """Where the run was measured, and a warning when the machine was not the run's alone."""
    lines = []
    label = (summary.get("hardware") or {}).get("label")
    if label:
        where = f"measured on: {label} (hardware id {summary['hardware'].get('id')})"
        if summary.get("engine") and summary.get("dtype"):
            where += f", {summary['engine']} engine at {summary['dtype']}"
        lines.append(where)
    if summary.get("ar_step_floor_ratio"):
        lines.append(f"AR step: {summary['ar_step_ms']:.1f} ms, "
                     f"{summary['ar_step_floor_ratio']:.2f}x the weight-read floor "
                     f"({summary['floor_ms']:.1f} ms)")  # fmt: skip
    if "reference_identical" in summary:
        n = summary.get("n_prompts", 0)
        same = round(summary["reference_identical"] * n)
        ratio = summary.get("ar_vs_reference")
        versus = f"; our AR runs at {ratio:.2f}x its tok/s" if ratio else ""
        lines.append(f"generate(): transformers' greedy loop, eager engine, same prompts and "
                     f"dtype; output equal to our AR loop's on {same}/{n}{versus}")  # fmt: skip
    lines += llamacpp_lines(summary)
    started = startup_line(summary.get("startup") or {})
    if started:
        lines.append(started)
    if summary.get("load_warning"):
        lines.append(f"WARNING: {summary['load_warning']}")
    return lines


def llamacpp_lines(summary: dict[str, Any]) -> list[str]:
    """What a llama.cpp reference (``reference=llamacpp``) or a ``backend=llamacpp`` run was."""
    n = summary.get("n_prompts", 0)
    lines = []
    if "llamacpp_identical" in summary:
        same = round(summary["llamacpp_identical"] * n)
        ratio = summary.get("ar_vs_llamacpp")
        versus = f"; our AR runs at {ratio:.2f}x its tok/s" if ratio else ""
        lines.append("llama.cpp: the same GGUF through llama-cpp-python, same prompt ids and "
                     "threads, greedy; its Q4_1 arithmetic is not our dequantized weights', so "
                     f"outputs are expected to differ: equal to our AR loop's on {same}/{n}"
                     f"{versus}")  # fmt: skip
    info = summary.get("llamacpp_backend")
    if info:
        bufts = "on" if info.get("use_extra_bufts") else "off"
        lines.append(f"backend=llamacpp: llama-cpp-python {info.get('llama_cpp_python')}, "
                     f"{info.get('gguf')}, {info.get('threads')} threads, extra buffer types "
                     f"{bufts} (probe: {info.get('extra_bufts')}); speedup and identical are "
                     "against llama.cpp's own AR")  # fmt: skip
        if not info.get("lossless", True):
            lines.append(f"lossless: false: {info.get('lossless_why')}")
    return lines


def startup_line(startup: dict[str, Any]) -> str | None:
    """``start-up: 12.3 s to the first prompt (imports and config 6.1, model 4.0, ...), then
    warm-up 5.2 s`` from a summary's ``startup`` (None without a ready time)."""
    ready = startup.get("ready_s")
    if ready is None:
        return None
    phases = startup.get("phases", {}).items()
    parts = ", ".join(f"{name.replace('_', ' ')} {s:.1f}" for name, s in phases)
    line = f"start-up: {ready:.1f} s to the first prompt ({parts})"
    if startup.get("warmup_s") is not None:
        line += f", then warm-up {startup['warmup_s']:.1f} s"
    return line


def print_summary(summary: dict[str, Any]) -> None:
    console = Console(width=max(Console().width, 120))
    console.print(summary_table(summary))
    for line in setting_lines(summary):
        console.print(line, markup=False)
    if "gain_vs_strict" in summary:
        console.print(
            f"vs strict greedy: throughput gain {fmt(summary['gain_vs_strict'], '{:+.1%}')}, "
            f"divergence {fmt(summary['divergence'], '{:.1%}')}, "
            f"accuracy delta {fmt(summary.get('accuracy_delta'), '{:+.3f}')}"
        )


BATCH_COLUMNS = [
    ("baseline_tokens_per_s", "AR tok/s", "{:.2f}"),
    ("tokens_per_s", "method tok/s", "{:.2f}"),
    ("speedup", "speedup", "{:.2f}x"),
    ("mat", "MAT", "{:.2f}"),
]


def batch_table(summary: dict[str, Any]) -> Table:
    """One row per batch size (``backend=vllm`` runs): AR and method tok/s, speedup, MAT."""
    label = summary.get("label") or "method"
    table = Table(title=f"{label}, backend=vllm, {summary.get('n_prompts', 0)} prompts per batch")
    table.add_column("batch", justify="right")
    for _, label, _ in BATCH_COLUMNS:
        table.add_column(label, justify="right")
    table.add_column("identical", justify="right")
    for size, block in summary.get("by_batch", {}).items():
        n = block.get("n_prompts", 0)
        identical = block.get("identical")
        cells = [fmt(block.get(key), pattern) for key, _, pattern in BATCH_COLUMNS]
        cells.append("-" if identical is None else f"{round(identical * n)}/{n}")
        table.add_row(str(size), *cells)
    return table


def print_batch_summary(summary: dict[str, Any]) -> None:
    console = Console(width=max(Console().width, 120))
    console.print(batch_table(summary))
    for line in setting_lines(summary):
        console.print(line)


SERVE_COLUMNS = [
    (("baseline", "output_throughput"), "AR tok/s", "{:.1f}"),
    (("method", "output_throughput"), "method tok/s", "{:.1f}"),
    (("throughput_speedup",), "speedup", "{:.2f}x"),
    (("baseline", "p50_tpot_ms"), "AR TPOT p50", "{:.1f}"),
    (("method", "p50_tpot_ms"), "TPOT p50", "{:.1f}"),
    (("method", "p95_tpot_ms"), "TPOT p95", "{:.1f}"),
    (("baseline", "p50_ttft_ms"), "AR TTFT p50", "{:.0f}"),
    (("method", "p50_ttft_ms"), "TTFT p50", "{:.0f}"),
    (("acceptance", "length"), "accept len", "{:.2f}"),
]


def dig(block: dict[str, Any] | None, path: tuple[str, ...]) -> Any:
    """``block[path[0]][path[1]]...``, None where a level is missing."""
    for key in path:
        block = block.get(key) if isinstance(block, dict) else None
    return block


def serve_table(summary: dict[str, Any]) -> Table:
    """One row per concurrency (``backend=vllm_serve`` runs): throughput, TPOT and TTFT (ms)."""
    label = summary.get("label") or "method"
    table = Table(title=f"{label}, backend=vllm_serve, {summary.get('n_prompts', 0)} prompts "
                        "per concurrency")  # fmt: skip
    table.add_column("concurrency", justify="right")
    for _, label, _ in SERVE_COLUMNS:
        table.add_column(label, justify="right")
    table.add_column("identical", justify="right")
    for level, block in summary.get("by_concurrency", {}).items():
        cells = [fmt(dig(block, path), pattern) for path, _, pattern in SERVE_COLUMNS]
        cells.append(fmt(block.get("identical"), "{:.0%}"))
        table.add_row(str(level), *cells)
    return table


def print_serve_summary(summary: dict[str, Any]) -> None:
    console = Console(width=max(Console().width, 140))
    console.print(serve_table(summary))
    for line in setting_lines(summary):
        console.print(line)
