"""What a training run writes beside its checkpoint: the loss log (CSV), its plot and the
summary (JSON)."""

from __future__ import annotations

import csv
import itertools
import json
import time
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from racer_bench.train.job import Job


def finish(
    cfg: DictConfig, job: Job, data: dict[str, Any], out: Path, progress: dict, start: int,
    calibration: dict[str, Any] | None, t_start: float,
) -> dict[str, Any]:  # fmt: skip
    """Write the loss log, its plot and the summary next to the checkpoint ``out``."""
    log, evals = progress["log"], progress["evals"]
    write_log(out.with_suffix(".losses.csv"), log)
    plot_curves(out.with_suffix(".loss.png"), log, evals, f"{cfg.kind} on {cfg.model_name}")
    summary = _summary(cfg, data, job.samples, log, progress["step"], progress["train_s"],
                       time.time() - t_start)  # fmt: skip
    summary.update(resumed_from=start, held_out_sequences=len(job.held), eval_curve=evals)
    if evals:
        summary["depth1_accuracy"] = {k: v for k, v in evals[-1].items() if k.startswith("acc")}
    if calibration is not None:
        summary["calibration"] = calibration
    out.with_suffix(".json").write_text(json.dumps(summary, indent=1))
    return summary


def write_log(path: Path, log: list[dict[str, float]]) -> None:
    """One CSV row per step: step, time_s (training time so far), loss, the loss's parts."""
    fields = list(dict.fromkeys(k for row in log for k in row))
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields or ["step", "time_s", "loss"])
        writer.writeheader()
        writer.writerows(log)


def plot_curves(path: Path, log: list[dict[str, float]], evals: list[dict], title: str) -> None:
    """Training loss (moving average) against step, held-out loss as points."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3.5))
    ax = fig.add_subplot()
    if log:
        window = max(1, len(log) // 50)
        loss = torch.tensor([r["loss"] for r in log])
        smooth = loss.unfold(0, window, 1).mean(-1) if len(loss) >= window else loss
        ax.plot([r["step"] for r in log][window - 1 :], smooth.tolist(), label="train (mean)")
    points = [e for e in evals if e["loss"] is not None]
    if points:
        ax.plot([e["step"] for e in points], [e["loss"] for e in points], "o-", label="held-out")
    ax.set_xlabel("step (one sequence)")
    ax.set_ylabel("loss")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _summary(cfg, data, samples, log, steps, train_s, total_s) -> dict[str, Any]:
    """Loss curve in tenths (mean loss of each tenth of the run) plus sizes and times."""
    losses = [r["loss"] for r in log]
    cuts = [len(losses) * i // 10 for i in range(11)]  # exactly ten parts (fewer if < 10 steps)
    curve = [sum(losses[a:b]) / (b - a) for a, b in itertools.pairwise(cuts) if b > a]
    return {
        "method": cfg.kind, "model": cfg.model_name, "steps": steps, "train_s": train_s,
        "total_s": total_s, "dataset_build_s": data.get("wall_s"), "sequences": len(samples),
        "tokens": sum(len(s.ids) for s in samples), "loss_curve": curve,
    }  # fmt: skip
