"""Figures drawn from run records (through :mod:`racer_bench.analysis.frames`); PNG and PDF.

Every function takes a tidy frame and returns a matplotlib ``Figure`` built without pyplot,
so scripts, the notebook and the W&B logger share them and no global state is touched:

* :func:`speedup_mat_bars`: speedup and MAT per method x task, bootstrap 95 % CIs;
* :func:`category_bars`: the same per Spec-Bench category (8 MT-Bench ones = multi_turn);
* :func:`accept_hist`: steps by accepted draft tokens, per method;
* :func:`retrieval_bars`: retrieval hit rate and accept share;
* :func:`rank_distribution`: accepted logits-tree nodes by copied top-k rank (the
  copy-logit vs last-logit analysis);
* :func:`capacity_curves`: speedup and MAT vs draft capacity;
* :func:`asd_frontier`: ASD throughput gain vs each quality loss (accuracy, answer agreement,
  target log-likelihood) over (B, g, M), per drafter, Pareto marked;
* :func:`reliability_diagram`: the confidence scheduler's predicted survival vs the share of
  nodes accepted, per bin (calibration error in the legend);
* :func:`draft_size_vs_cost`: forward sizes the scheduler chose, over the run's cost curve.

:func:`all_figures` draws every figure the loaded runs have data for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from racer_bench.analysis import frames, names

SPEC_BENCH_GROUPS = ("multi_turn", "translation", "summarization", "qa", "math_reasoning", "rag")
PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3",
           "#8c8c8c", "#ccb974", "#64b5cd")  # fmt: skip
WIDTH = 8.0  # inches; PNGs stay small at the default dpi
HIST_CAP = 10  # accepted-length bins shown one by one; longer steps are pooled


def colors(labels: Sequence[str]) -> dict[str, str]:
    """A colour per label: each method keeps its own in every figure (its YAML's
    ``display_color``); variants take the rest."""
    own = names.method_colors()
    out = {label: own[label] for label in labels if label in own}
    spare = [c for c in PALETTE if c not in own.values()]
    spare += [c for c in PALETTE if c not in spare and c not in out.values()]
    others = [label for label in dict.fromkeys(labels) if label not in out]
    return out | {label: spare[i % len(spare)] for i, label in enumerate(others)}


def context_line(df: pd.DataFrame) -> str:
    """``model · dtype · device · max_new_tokens`` of the runs behind a figure."""
    parts = []
    for key, fmt in (("model", "{}"), ("dtype", "{}"), ("device", "{}"),
                     ("max_new_tokens", "max_new_tokens {}")):  # fmt: skip
        if key in df:
            values = sorted({str(v) for v in df[key].dropna()})
            if values:
                parts.append(fmt.format("/".join(values)))
    return " · ".join(parts)


def task_name(task: str) -> str:
    return names.task_name(task)


def _errors(df: pd.DataFrame, value: str) -> np.ndarray | None:
    """Asymmetric error bars ``[2, n]`` from ``<stem>_ci_low/high`` columns (None if absent)."""
    low, high = f"{value}_ci_low", f"{value}_ci_high"
    if low not in df or high not in df or df[[low, high]].isna().all().all():
        return None
    err = np.vstack([df[value] - df[low], df[high] - df[value]]).astype(float)
    return np.nan_to_num(np.clip(err, 0, None))


def grouped_bars(
    ax: Axes, df: pd.DataFrame, group: str, value: str, groups: Sequence[str], scale: float = 1.0
) -> None:
    """Bars of ``value`` per ``group`` (x) and ``label`` (colour), with CI whiskers.

    Args:
        df: one row per (group, label); ``<value>_ci_low/high`` columns give the whiskers.
        groups: x order; scale: multiplies values (e.g. 100 for percentages).
    """
    labels = list(dict.fromkeys(df["label"]))
    palette = colors(labels)
    width = 0.8 / max(len(labels), 1)
    for i, label in enumerate(labels):
        rows = df[df["label"] == label].set_index(group).reindex(groups)
        x = np.arange(len(groups)) + (i - (len(labels) - 1) / 2) * width
        err = _errors(rows, value)
        err = None if err is None else err * scale
        ax.bar(x, rows[value] * scale, width, label=label, color=palette[label], yerr=err,
               capsize=2, error_kw={"lw": 0.8})  # fmt: skip
    ax.set_xticks(np.arange(len(groups)))
    ax.set_xticklabels([g.replace("_", " ") for g in groups], rotation=20 if len(groups) > 3 else 0)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def _finish(fig: Figure, title: str, df: pd.DataFrame, legend_ax: Axes | None = None) -> Figure:
    """Title with the run context, one legend below the axes, tight layout."""
    fig.suptitle(f"{title}\n{context_line(df)}", fontsize=9)
    ax = legend_ax or fig.axes[0]
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ncol = min(len(labels), 3)
        fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
        rows = -(-len(labels) // ncol)
        legend_in = 0.15 + 0.22 * rows  # inches kept free below the axes for the legend
        fig.tight_layout(rect=(0, legend_in / fig.get_figheight(), 1, 1))
    else:
        fig.tight_layout()
    return fig


def speedup_mat_bars(runs_df: pd.DataFrame) -> Figure:
    """Speedup over AR and MAT per method (colour) and task (x), bootstrap 95 % CIs.

    Args:
        runs_df: :func:`racer_bench.analysis.frames.runs_frame` (runs without an AR baseline are
            dropped).
    """
    df = runs_df.dropna(subset=["speedup"]) if "speedup" in runs_df else runs_df.iloc[:0]
    if df.empty:
        raise ValueError("no run with an AR baseline (baseline=same_run) to draw speedups from")
    tasks = list(dict.fromkeys(df["task"]))
    df = df.assign(task=df["task"].map(task_name))
    groups = [task_name(t) for t in tasks]
    fig = Figure(figsize=(WIDTH, 3.8))
    ax_speed, ax_mat = fig.subplots(1, 2)
    grouped_bars(ax_speed, df, "task", "speedup", groups)
    ax_speed.axhline(1.0, color="black", lw=0.8, ls="--")
    ax_speed.set_ylabel("speedup over AR (×, wall time)")
    grouped_bars(ax_mat, df, "task", "mat", groups)
    ax_mat.axhline(1.0, color="black", lw=0.8, ls="--")
    ax_mat.set_ylabel("MAT τ (tokens per target forward)")
    return _finish(fig, "Speedup and mean accepted tokens (bars: bootstrap 95% CI)", df)


def category_bars(categories_df: pd.DataFrame, runs_df: pd.DataFrame | None = None) -> Figure:
    """Speedup (top) and MAT (bottom) per Spec-Bench category, one colour per method.

    Args:
        categories_df: :func:`racer_bench.analysis.frames.categories_frame` of Spec-Bench runs.
        runs_df: optional, only for the model/hardware line of the title.
    """
    df = categories_df[categories_df["task"] == "spec_bench"]
    if df.empty or df["category"].nunique() < 2 or "speedup" not in df:
        raise ValueError("no Spec-Bench run with several categories and an AR baseline")
    present = set(df["category"])
    groups = [g for g in SPEC_BENCH_GROUPS if g in present] + sorted(
        present - set(SPEC_BENCH_GROUPS)
    )
    fig = Figure(figsize=(WIDTH, 5.6))
    ax_speed, ax_mat = fig.subplots(2, 1, sharex=True)
    grouped_bars(ax_speed, df, "category", "speedup", groups)
    ax_speed.axhline(1.0, color="black", lw=0.8, ls="--")
    ax_speed.set_ylabel("speedup over AR (×)")
    grouped_bars(ax_mat, df, "category", "mat", groups)
    ax_mat.set_ylabel("MAT τ (tokens / forward)")
    ax_mat.set_xlabel("Spec-Bench category (multi turn = the 8 MT-Bench categories)")
    context = runs_df if runs_df is not None else df
    return _finish(fig, "Spec-Bench per category (bootstrap 95% CI)", context)


def _task_axes(fig: Figure, tasks: Sequence[str]) -> list[Axes]:
    """One panel per task, side by side, sharing the y axis."""
    axes = fig.subplots(1, len(tasks), sharey=True, squeeze=False)[0]
    for ax, task in zip(axes, tasks, strict=True):
        ax.set_title(task_name(task), fontsize=9)
    return list(axes)


def _task_panels(
    df: pd.DataFrame,
    draw: Callable[[Axes, str], None],
    ylabel: str,
    title: str,
    runs_df: pd.DataFrame | None,
) -> Figure:
    """One panel per task of ``df`` (``draw(ax, task)`` fills each), the y label on the first,
    the legend from the panel with the most entries."""
    tasks = list(dict.fromkeys(df["task"]))
    fig = Figure(figsize=(WIDTH, 3.4))
    axes = _task_axes(fig, tasks)
    for ax, task in zip(axes, tasks, strict=True):
        draw(ax, task)
    axes[0].set_ylabel(ylabel)
    legend_ax = max(axes, key=lambda a: len(a.get_legend_handles_labels()[1]))
    return _finish(fig, title, runs_df if runs_df is not None else df, legend_ax)


def pool_tail(hist_df: pd.DataFrame, cap: int) -> pd.DataFrame:
    """Accepted counts >= ``cap`` pooled into one ``"<cap>+"`` bin; counts become strings."""
    capped = hist_df["n_accepted"].map(lambda n: f"{cap}+" if n >= cap else str(n))
    df = hist_df.assign(n_accepted=capped)
    return df.groupby(["label", "n_accepted"], as_index=False, sort=False)["share"].sum()


def accept_hist(hist_df: pd.DataFrame, runs_df: pd.DataFrame | None = None) -> Figure:
    """Share of steps by accepted draft tokens (bonus excluded), per method, one panel per task.

    Args:
        hist_df: :func:`racer_bench.analysis.frames.hist_frame`.
        runs_df: optional, only for the model/hardware line of the title.
    """
    if hist_df.empty:
        raise ValueError("no steps to histogram")
    longest = int(hist_df["n_accepted"].max())  # same bins in every panel
    counts = [str(c) for c in range(min(longest + 1, HIST_CAP))]
    counts += [f"{HIST_CAP}+"] if longest >= HIST_CAP else []

    def draw(ax: Axes, task: str) -> None:
        df = pool_tail(hist_df[hist_df["task"] == task], HIST_CAP)
        grouped_bars(ax, df, "n_accepted", "share", counts, scale=100)
        ax.set_xticklabels(counts, rotation=0)
        ax.set_xlabel("accepted draft tokens per step")

    title = "Accepted length per verification step (bonus token excluded)"
    return _task_panels(hist_df, draw, "share of steps (%)", title, runs_df)


def retrieval_bars(runs_df: pd.DataFrame) -> Figure:
    """Retrieval hit rate (steps whose draft holds a retrieved node) and accept share.

    Args:
        runs_df: :func:`racer_bench.analysis.frames.runs_frame`; methods without retrieval are
            dropped.
    """
    df = runs_df.dropna(subset=["retrieval_hit_rate"])
    df = df[df["retrieval_hit_rate"] > 0]
    if df.empty:
        raise ValueError("no run whose drafts hold retrieval-sourced nodes")
    groups = [task_name(t) for t in dict.fromkeys(df["task"])]
    df = df.assign(task=df["task"].map(task_name))
    fig = Figure(figsize=(WIDTH, 3.6))
    ax_hit, ax_share = fig.subplots(1, 2)
    grouped_bars(ax_hit, df, "task", "retrieval_hit_rate", groups, scale=100)
    ax_hit.set_ylabel("retrieval hit rate (% of steps)")
    grouped_bars(ax_share, df, "task", "retrieval_accept_share", groups, scale=100)
    ax_share.set_ylabel("retrieved share of accepted (%)")
    ax_share.set_ylim(0, 105)
    return _finish(fig, "Retrieval: how often it proposes, and how much of the accepted draft", df)


def rank_distribution(ranks_df: pd.DataFrame, runs_df: pd.DataFrame | None = None) -> Figure:
    """Accepted logits-tree nodes by the top-k rank they were copied from, per variant.

    The copy-logit analysis: rows copied from a token's latest occurrence (``logit_source=copy``)
    against the last verified logits (``last``); the legend gives each variant's MAT.

    Args:
        ranks_df: :func:`racer_bench.analysis.frames.ranks_frame`.
        runs_df: optional, only for the model/hardware line of the title.
    """
    if ranks_df.empty:
        raise ValueError("no run records accepted ranks (Draft.rank)")
    df = ranks_df.assign(label=[f"{lab} (MAT {m:.2f})" for lab, m in
                                zip(ranks_df["label"], ranks_df["mat"], strict=True)])  # fmt: skip

    def draw(ax: Axes, task: str) -> None:
        sub = df[df["task"] == task]
        ranks = [str(r) for r in range(int(sub["rank"].max()) + 1)]
        grouped_bars(ax, sub.assign(rank=sub["rank"].astype(str)), "rank", "share", ranks, 100)
        step = max(1, len(ranks) // 16)  # keep tick labels readable for long top-k lists
        ax.set_xticks(range(0, len(ranks), step), ranks[::step], rotation=0)
        ax.set_xlabel("rank in the reused top-k list (0 = top-1)")

    title = "Which top-k candidates get accepted: copy-logit vs last-logit"
    ylabel = "share of accepted logits-tree nodes (%)"
    return _task_panels(df, draw, ylabel, title, runs_df if runs_df is not None else ranks_df)


def capacity_curves(runs_df: pd.DataFrame) -> Figure:
    """Speedup and MAT against the draft capacity, one line per method (and task).

    Args:
        runs_df: :func:`racer_bench.analysis.frames.runs_frame`; a line needs >= 2 capacities of the
            same method, task and other hyperparameters.
    """
    if not {"capacity", "speedup"} <= set(runs_df.columns):
        raise ValueError("no speedups (runs without an AR baseline) or no capacities")
    df = runs_df.dropna(subset=["capacity", "speedup"])
    df = df.assign(line=df["family"] + " · " + df["task"].map(task_name))
    df = df[df.groupby("line")["capacity"].transform("nunique") >= 2]
    if df.empty:
        raise ValueError("no method run at two or more draft capacities")
    fig = Figure(figsize=(WIDTH, 3.6))
    axes = fig.subplots(1, 2)
    palette = colors(list(df["line"]))
    for line, rows in df.sort_values("capacity").groupby("line", sort=False):
        for ax, value in zip(axes, ("speedup", "mat"), strict=True):
            err = _errors(rows, value)
            ax.errorbar(rows["capacity"], rows[value], yerr=err, marker="o", ms=4, capsize=2,
                        color=palette[line], label=line)  # fmt: skip
    capacities = sorted(df["capacity"].unique())
    for ax, ylabel in zip(axes, ("speedup over AR (×)", "MAT τ (tokens / forward)"), strict=True):
        ax.set_xscale("log", base=2)
        ax.set_xticks(capacities, [f"{c:g}" for c in capacities])
        ax.set_xlabel("draft capacity (nodes per step)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[0].axhline(1.0, color="black", lw=0.8, ls="--")
    return _finish(fig, "Draft capacity: longer trees accept more, but cost more to verify", df)


def pareto_front(*columns: np.ndarray) -> np.ndarray:
    """Mask of points no other point beats on every column (higher is better).

    A column that is NaN everywhere (not measured) is left out; a point with NaN in a kept
    column is not on the front.

    Args:
        columns: FloatTensor-like [n] each.
    Returns:
        bool array [n].
    """
    values = [np.asarray(c, dtype=float) for c in columns]
    values = [v for v in values if not np.isnan(v).all()] or values[:1]
    data = np.vstack(values)  # [k, n]
    valid = ~np.isnan(data).any(axis=0)
    front = np.zeros(data.shape[1], dtype=bool)
    for i in np.flatnonzero(valid):
        at_least = (data >= data[:, [i]]).all(axis=0)
        better = valid & at_least & (data > data[:, [i]]).any(axis=0)
        front[i] = not better.any()
    return front


def asd_label(row: pd.Series) -> str:
    """``B=8 g=0.25 M=2`` from the verifier columns of a runs-frame row."""
    parts = [("B", "verifier.budget"), ("g", "verifier.gate"), ("M", "verifier.cap")]
    return " ".join(f"{short}={row[col]:g}" for short, col in parts if col in row)


Loss = Callable[[np.ndarray], np.ndarray]
# What a (B, g, M) setting loses against strict greedy, per quality measure (runs-frame column,
# axis label, loss as a decreasing function of the measure): 0 = nothing lost.
QUALITY_LOSSES = (
    ("accuracy_delta", "accuracy loss (points)", lambda v: -100 * v),
    ("agreement", "answers differing from strict (%)", lambda v: 100 * (1 - v)),
    ("logprob_gap", "target log-lik loss (nats / token)", lambda v: -v),
)
NOT_MEASURED = "not measured"


def measured(df: pd.DataFrame, column: str) -> bool:
    """Whether any run of ``df`` has the measure ``column``."""
    return column in df and bool(df[column].notna().any())


def quality_loss(df: pd.DataFrame, column: str, loss: Loss) -> tuple[np.ndarray, np.ndarray | None]:
    """Loss per run and its asymmetric interval ``[2, n]`` from the measure's CI columns."""
    x = loss(df[column].to_numpy(dtype=float))
    low, high = f"{column}_ci_low", f"{column}_ci_high"
    if low not in df or high not in df:
        return x, None
    worst, best = loss(df[low].to_numpy(dtype=float)), loss(df[high].to_numpy(dtype=float))
    return x, np.nan_to_num(np.clip(np.vstack([x - best, worst - x]), 0, None))


def _frontier_panel(ax: Axes, df: pd.DataFrame, column: str, xlabel: str, loss: Loss) -> None:
    """One task's ASD settings against one quality loss, per drafter: its Pareto points
    (most gain for least loss) ringed, joined and labelled."""
    ax.set_xlabel(xlabel, fontsize=8)
    ax.grid(alpha=0.3)
    if not measured(df, column):
        ax.text(0.5, 0.5, NOT_MEASURED, transform=ax.transAxes, ha="center", va="center",
                color="#8c8c8c")  # fmt: skip
        ax.set_xticks([])
        return
    drafters = df["method"].map(names.method_name)
    palette = colors(list(dict.fromkeys(drafters)))
    for drafter, rows in df.groupby(drafters, sort=False):
        x, xerr = quality_loss(rows, column, loss)
        y = rows["gain_vs_strict"].to_numpy(dtype=float) * 100
        color = palette[drafter]
        ax.errorbar(x, y, xerr=xerr, fmt="none", ecolor=color, alpha=0.35, elinewidth=0.7)
        ax.scatter(x, y, s=16, color=color, alpha=0.7, label=drafter)
        front = pareto_front(-x, y)
        order = np.argsort(x[front])
        ax.scatter(x[front], y[front], s=34, color=color, edgecolor="black", zorder=3)
        ax.plot(x[front][order], y[front][order], color=color, lw=1, zorder=2)
        for (_, row), xi, yi in zip(rows[front].iterrows(), x[front], y[front], strict=True):
            ax.annotate(asd_label(row), (xi, yi), textcoords="offset points", fontsize=5.5,
                        xytext=(3, 3))  # fmt: skip
    ax.axhline(0, color="black", lw=0.6)
    ax.axvline(0, color="black", lw=0.6)
    ax.margins(x=0.12, y=0.15)


def asd_frontier(runs_df: pd.DataFrame) -> Figure:
    """ASD: throughput gain over strict greedy against each quality loss, one point per
    (B, g, M) and drafter; a measure no run has is drawn as an empty "not measured" panel.

    Args:
        runs_df: :func:`racer_bench.analysis.frames.runs_frame`; rows need ``gain_vs_strict``
            (a lossy verifier paired with strict greedy) and at least one measure of
            :data:`QUALITY_LOSSES`.
    """
    why = "no lossy-verifier run with a quality measure (need gain_vs_strict)"
    if "gain_vs_strict" not in runs_df:
        raise ValueError(why)
    df = runs_df.dropna(subset=["gain_vs_strict"])
    if df.empty or not any(measured(df, column) for column, _, _ in QUALITY_LOSSES):
        raise ValueError(why)
    tasks = list(dict.fromkeys(df["task"]))
    fig = Figure(figsize=(WIDTH, 0.9 + 2.9 * len(tasks)))
    grid = fig.subplots(len(tasks), len(QUALITY_LOSSES), sharey="row", squeeze=False)
    for axes, task in zip(grid, tasks, strict=True):
        rows = df[df["task"] == task]
        for ax, (column, xlabel, loss) in zip(axes, QUALITY_LOSSES, strict=True):
            _frontier_panel(ax, rows, column, xlabel, loss)
        axes[0].set_ylabel(f"{task_name(task)}: gain vs strict (%)", fontsize=8)
    # the panel with the most drafters: tasks may have been run with different drafters
    legend_ax = max(grid.flat, key=lambda ax: len(ax.get_legend_handles_labels()[1]))
    title = "ASD frontier over budget B, gate g, cap M: throughput gain against quality loss"
    return _finish(fig, title, df, legend_ax)


def reliability_diagram(cal_df: pd.DataFrame, runs_df: pd.DataFrame | None = None) -> Figure:
    """Predicted survival vs observed acceptance per bin (top) and nodes per bin (bottom).

    A calibrated scheduler's points lie on the diagonal; points below it are over-confident
    (the scheduler verifies nodes that fail more often than it expects).

    Args:
        cal_df: :func:`racer_bench.analysis.frames.calibration_frame`.
        runs_df: optional, only for the model/hardware line of the title.
    """
    if cal_df.empty:
        raise ValueError("no run with scheduler predictions (scheduler=confidence)")
    fig = Figure(figsize=(WIDTH * 0.7, 5.2))
    ax, ax_count = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    labels = list(dict.fromkeys(cal_df["label"]))
    palette = colors(labels)
    width = 0.1 / max(len(labels), 1)
    ax.plot([0, 1], [0, 1], color="black", lw=0.8, ls="--", label="perfect calibration")
    for i, label in enumerate(labels):
        rows = cal_df[cal_df["label"] == label]
        ece = float(rows["calibration_error"].iloc[0])
        ax.plot(rows["predicted"], rows["accepted"], marker="o", ms=4, color=palette[label],
                label=f"{label} (ECE {ece:.3f})")  # fmt: skip
        centres = (rows["bin_low"] + rows["bin_high"]) / 2
        offset = (i - (len(labels) - 1) / 2) * width
        ax_count.bar(centres + offset, rows["nodes"], width, color=palette[label])
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of nodes accepted")
    ax.grid(alpha=0.3)
    ax_count.set_yscale("log")
    ax_count.set_ylabel("nodes")
    ax_count.set_xlabel("predicted survival S(v) = P(node accepted), 10 equal-width bins")
    title = "Scheduler calibration: predicted vs realised acceptance of verified nodes"
    return _finish(fig, title, runs_df if runs_df is not None else cal_df, ax)


def draft_size_vs_cost(sizes_df: pd.DataFrame, runs_df: pd.DataFrame | None = None) -> Figure:
    """Per run: share of steps at each forward size (bars) over its cost curve (line).

    Args:
        sizes_df: :func:`racer_bench.analysis.frames.draft_sizes_frame`.
        runs_df: optional, only for the model/hardware line of the title.
    """
    if sizes_df.empty:
        raise ValueError("no run that saved a cost profile (scheduler=confidence)")
    labels = list(dict.fromkeys(sizes_df["label"]))
    ncols = min(len(labels), 3)
    nrows = -(-len(labels) // ncols)
    fig = Figure(figsize=(WIDTH, 2.9 * nrows + 0.6))
    axes = fig.subplots(nrows, ncols, squeeze=False).flatten()
    for ax in axes[len(labels) :]:
        ax.set_visible(False)
    for ax, label in zip(axes, labels, strict=False):
        rows = sizes_df[sizes_df["label"] == label]
        used = rows[rows["steps"] > 0]
        ax.bar(used["size"], used["share"] * 100, width=0.9, color=PALETTE[0],
               label="steps at this forward size")  # fmt: skip
        ax.set_xlabel("tokens in the verification forward (N)")
        ax.set_title(label, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        curve = ax.twinx()
        curve.plot(rows["size"], rows["cost"], color=PALETTE[3], lw=1.2, label="cost(N)")
        candidates = float(rows["candidate_forward_mean"].iloc[0])
        if not np.isnan(candidates):
            ax.axvline(candidates, color="#8c8c8c", ls=":", lw=1,
                       label="mean unscheduled candidate forward")  # fmt: skip
        curve.set_ylabel("cost(N) / cost(1)", color=PALETTE[3])
        curve.set_ylim(bottom=0)
    axes[0].set_ylabel("share of steps (%)")
    handles, names = axes[0].get_legend_handles_labels()
    curve_handles, curve_names = fig.axes[-1].get_legend_handles_labels()
    fig.legend(handles + curve_handles, names + curve_names, loc="lower center", ncol=3,
               fontsize=8, frameon=False)  # fmt: skip
    context = context_line(runs_df if runs_df is not None else sizes_df)
    title = "Draft sizes the scheduler chose, over the target's cost curve"
    fig.suptitle(f"{title}\n{context}", fontsize=9)
    fig.tight_layout(rect=(0, 0.45 / fig.get_figheight(), 1, 1))
    return fig


def logit_source_first(ranks_df: pd.DataFrame, runs_df: pd.DataFrame) -> pd.DataFrame:
    """The rows of runs whose method sets ``logit_source`` (the copy- vs last-logit analysis)
    when there are any, else all rows."""
    column = "method.logit_source"
    if ranks_df.empty or column not in runs_df:
        return ranks_df
    chosen = ranks_df["run_id"].isin(runs_df.loc[runs_df[column].notna(), "run_id"])
    return ranks_df[chosen] if chosen.any() else ranks_df


def all_figures(runs: Sequence[frames.Run], only: Sequence[str] | None = None) -> dict[str, Figure]:
    """Every figure (or those named in ``only``) the runs have data for, by file stem.

    Figures without data are skipped.
    """
    runs_df = frames.runs_frame(runs)
    makers = {
        "speedup_mat": lambda: speedup_mat_bars(runs_df),
        "categories": lambda: category_bars(frames.categories_frame(runs), runs_df),
        "accept_hist": lambda: accept_hist(frames.hist_frame(runs), runs_df),
        "retrieval": lambda: retrieval_bars(runs_df),
        "accepted_ranks": lambda: rank_distribution(
            logit_source_first(frames.ranks_frame(runs), runs_df), runs_df
        ),
        "capacity": lambda: capacity_curves(runs_df),
        "asd_frontier": lambda: asd_frontier(runs_df),
        "reliability": lambda: reliability_diagram(frames.calibration_frame(runs), runs_df),
        "draft_size_cost": lambda: draft_size_vs_cost(frames.draft_sizes_frame(runs), runs_df),
    }
    figures = {}
    for name, make in makers.items():
        if only is not None and name not in only:
            continue
        try:
            figures[name] = make()
        except ValueError:  # no data for this figure in these runs
            continue
    return figures


def save_figure(fig: Figure, out_dir: Path | str, name: str,
                formats: Sequence[str] = ("png", "pdf"), dpi: int = 110) -> list[Path]:  # fmt: skip
    """Write ``<out_dir>/<name>.<fmt>`` for each format; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.{fmt}" for fmt in formats]
    for path in paths:
        fig.savefig(path, dpi=dpi, metadata={"Software": None} if path.suffix == ".png" else None)
    return paths
