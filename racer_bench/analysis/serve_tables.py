"""Tables and the throughput-latency figure of serving sweeps (``backend=vllm_serve`` runs).

Each run holds one method and its own AR baseline, measured at every concurrency against the
same prompts; a method's ratios are always to the AR of its own run. AR appears once, from the
first run given, with the spread of the other runs' AR beside it (how far apart identical
servers land).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from racer_bench.record import folder as run_records

AA_LABEL = "vLLM AR again (A/A)"  # a run without speculation: a second AR server


@dataclass
class ServeRun:
    """One serving run: its label and the summary's block per concurrency."""

    key: str
    label: str
    levels: dict[int, dict[str, Any]]


def load_serve_runs(run_dirs: Sequence[Path]) -> list[ServeRun]:
    """Runs in the order given (their summaries must be serving summaries)."""
    runs = []
    for run in run_dirs:
        manifest = run_records.read_json(run / run_records.MANIFEST_FILE)
        summary = run_records.read_json(run / run_records.SUMMARY_FILE)
        if summary.get("mode") != "serve":
            raise ValueError(f"{run}: not a serving run (backend=vllm_serve)")
        levels = {int(c): block for c, block in summary["by_concurrency"].items()}
        key = str(manifest.get("method"))
        speculates = (manifest.get("backend") or {}).get("speculative_config") is not None
        label = summary.get("label") or key if speculates else AA_LABEL
        runs.append(ServeRun(key, label, levels))
    return runs


def concurrencies(runs: Sequence[ServeRun]) -> list[int]:
    return sorted({c for r in runs for c in r.levels})


def cell(value: float | None, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


def ar_spread(runs: Sequence[ServeRun], c: int, key: str) -> str:
    """AR's ``key`` at concurrency ``c``: the first run's, with the range over all runs."""
    values = [r.levels[c]["baseline"][key] for r in runs if c in r.levels]
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{values[0]:.1f} ({min(values):.1f}-{max(values):.1f})"


def header(title: str, levels: Sequence[int]) -> list[str]:
    """A table's first two lines: the title cell and one column per concurrency."""
    return [f"| {title} | " + " | ".join(f"c={c}" for c in levels) + " |",
            "|---|" + "---:|" * len(levels)]  # fmt: skip


def row(label: str, levels: Sequence[int], blocks: dict[int, dict[str, Any]],
        show: Callable[[dict[str, Any]], str]) -> str:  # fmt: skip
    """One Markdown row: ``show`` of each concurrency's block, ``-`` where a run has none."""
    cells = [show(blocks[c]) if c in blocks else "-" for c in levels]
    return f"| {label} | " + " | ".join(cells) + " |"


def throughput_table(runs: Sequence[ServeRun]) -> str:
    """Output tok/s and the gain over the run's own AR, per concurrency."""
    levels = concurrencies(runs)
    ar = " | ".join(ar_spread(runs, c, "output_throughput") for c in levels)
    lines = [*header("output tok/s (x own AR)", levels), f"| vLLM AR (range over runs) | {ar} |"]

    def show(block: dict[str, Any]) -> str:
        return (f"{block['method']['output_throughput']:.1f} "
                f"({cell(block['throughput_speedup'], '{:.2f}x')})")  # fmt: skip

    lines += [row(r.label, levels, r.levels, show) for r in runs]
    return "\n".join(lines)


def latency_table(runs: Sequence[ServeRun], name: str, title: str) -> str:
    """p50 / p95 of one latency (``tpot``, ``ttft``...) in ms, per concurrency, AR first."""
    levels = concurrencies(runs)
    lines = header(f"{title} p50 / p95 (ms)", levels)

    def pair(mode: str) -> Callable[[dict[str, Any]], str]:
        return lambda block: (f"{cell(block[mode].get(f'p50_{name}_ms'), '{:.1f}')} / "
                              f"{cell(block[mode].get(f'p95_{name}_ms'), '{:.1f}')}")  # fmt: skip

    if runs:
        lines.append(row("vLLM AR", levels, runs[0].levels, pair("baseline")))
    lines += [row(r.label, levels, r.levels, pair("method")) for r in runs]
    return "\n".join(lines)


def acceptance_table(runs: Sequence[ServeRun]) -> str:
    """Acceptance per concurrency: vLLM's acceptance length (per step that drafted), our
    drafters' MAT averaged per request / per token, and the identical-to-AR rate."""
    levels = concurrencies(runs)
    lines = header("accept length · MAT per request / per token · identical", levels)

    def show(block: dict[str, Any]) -> str:
        length = cell((block.get("acceptance") or {}).get("length"), "{:.2f}")
        per = block.get("per_request")
        mats = f"{per['mat_per_request']:.2f} / {per['mat_per_token']:.2f}" if per else "-"
        return f"{length} · {mats} · {cell(block.get('identical'), '{:.0%}')}"

    lines += [row(r.label, levels, r.levels, show) for r in runs]
    return "\n".join(lines)


def serve_tables(runs: Sequence[ServeRun]) -> str:
    """Every table of the serving doc, in reading order."""
    return "\n\n".join([throughput_table(runs), latency_table(runs, "tpot", "TPOT"),
                        latency_table(runs, "ttft", "TTFT"), acceptance_table(runs)])  # fmt: skip


def plot_serving(runs: Sequence[ServeRun], path: Path) -> Path:
    """Output throughput against p50 TPOT, one curve per method over the concurrencies (AR of
    every run in grey), so a reader sees what each method buys at each latency."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.6, 4.4))
    for i, r in enumerate(runs):
        levels = sorted(r.levels)
        base = [r.levels[c]["baseline"] for c in levels]
        ax.plot([b["p50_tpot_ms"] for b in base], [b["output_throughput"] for b in base],
                ".-", color="grey", alpha=0.5, linewidth=0.8,
                label="vLLM AR (each run)" if i == 0 else None)  # fmt: skip
        mine = [r.levels[c]["method"] for c in levels]
        ax.plot([m["p50_tpot_ms"] for m in mine], [m["output_throughput"] for m in mine], "o-",
                color=f"C{i}", label=r.label)  # fmt: skip
        for c, m in zip(levels, mine, strict=True):
            ax.annotate(str(c), (m["p50_tpot_ms"], m["output_throughput"]), fontsize=6,
                        xytext=(3, 2), textcoords="offset points")  # fmt: skip
    ax.set_xlabel("TPOT p50 (ms per output token, lower is better)")
    ax.set_ylabel("output throughput (tok/s)")
    ax.set_title("serving sweep: concurrency labelled at each point", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
