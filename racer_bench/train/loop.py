"""Train a draft head on the frozen target by self-distillation: a plain loop (data, optimiser,
clock, evaluation, checkpoints). What differs between heads (features read, the head, its loss,
depth-1 logits, calibration, checkpoint) is the head kind's (``methods.common.heads.kind``), handed
in
as :class:`~racer_bench.train.job.Heads` by ``scripts/train_drafter.py``.

Steps: (1) the target's greedy continuations of the distillation prompts are read from, or
added to, the cache ``data.cache`` (resumable, shared by every head; see
:mod:`racer_bench.train.distill_data`); (2) ``data.holdout`` of the sequences are held out (loss
curve on unseen data; calibration); (3) target features are computed once per sequence;
(4) the head trains with AdamW until ``train.max_minutes`` of training time in total (over all
resumed runs) or ``train.max_steps``; a resumable state ``<out>.state`` is written every
``train.save_every`` steps and at the end; (5) the kind fits what it fits after training on
the held-out sequences (DSpark: its confidence temperatures); (6) the head is written to
``out`` (what ``method.checkpoint`` takes), the loss log to ``<out>.losses.csv``, a plot to
``<out>.loss.png`` and a summary to ``<out>.json``. Config: ``conf/train/config.yaml``.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig

from racer_bench.engine.target import HFTarget
from racer_bench.train.clock import ActiveClock
from racer_bench.train.evaluation import evaluate
from racer_bench.train.features import precompute_features
from racer_bench.train.job import Heads, Job, dataset, prepare
from racer_bench.train.outputs import finish
from racer_bench.train.state import resume_state, save_state


def run_steps(cfg: DictConfig, job: Job, opt: Any, state_path: Path, state: dict) -> dict:
    """Train from ``state`` until the step or time cap, saving resumable states; returns the
    final progress (step, log, evals, train_s)."""
    from tqdm import tqdm

    step, log, evals = state["step"], state["log"], state["evals"]
    rng = random.Random(cfg.seed + step)
    budget_s = 60.0 * cfg.train.max_minutes
    max_steps = cfg.train.max_steps or float("inf")
    clock = ActiveClock(state["train_s"])
    bar = tqdm(total=cfg.train.max_steps or None, initial=step, desc=cfg.kind)
    while step < max_steps and clock.seconds < budget_s:
        clock.start()
        loss, parts = job.kind.loss(job.head, job.samples[rng.randrange(len(job.samples))], rng)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        clock.stop()
        log.append({"step": step, "time_s": round(clock.seconds, 3),
                    "loss": loss.item(), **parts})  # fmt: skip
        bar.update(1)
        if step % cfg.train.log_every == 0:
            recent = [r["loss"] for r in log[-cfg.train.log_every :]]
            bar.set_postfix(loss=f"{sum(recent) / len(recent):.3f}")
        if step % cfg.train.eval_every == 0 and job.held:
            evals.append(evaluate(cfg, job.kind, job.head, job.held, step))
        if step % cfg.train.save_every == 0:
            save_state(state_path, job.head, opt, job.fingerprint,
                       {"step": step, "log": log, "evals": evals,
                        "train_s": clock.seconds})  # fmt: skip
    bar.close()
    return {"step": step, "log": log, "evals": evals, "train_s": clock.seconds}


def train(cfg: DictConfig, heads: Heads) -> dict[str, Any]:
    """The whole job with the kind ``heads.kind``; returns a summary (also written next to the
    checkpoint as JSON)."""
    kind = heads.kind
    torch.set_num_threads(cfg.num_threads)
    torch.manual_seed(cfg.seed)
    t_start = time.time()
    target: HFTarget = instantiate(cfg.model)
    data = dataset(cfg, target)
    if cfg.data_only or cfg.features_only:
        computed = (
            precompute_features(cfg, target, data, heads.every_kind) if cfg.features_only else 0
        )
        return {"sequences": len(data["sequences"]), "generated": data["generated"],
                "tokens": sum(map(len, data["sequences"])), "wall_s": data["wall_s"],
                "features_computed": computed}  # fmt: skip
    job = prepare(cfg, heads, target, data)
    params = [p for p in job.head.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
    out = Path(cfg.out).expanduser()
    state_path = out.with_suffix(".state")
    state = resume_state(cfg, state_path, job.head, opt, job.fingerprint)
    progress = run_steps(cfg, job, opt, state_path, state)
    step, evals = progress["step"], progress["evals"]
    if job.held and (not evals or evals[-1]["step"] != step):
        evals.append(evaluate(cfg, kind, job.head, job.held, step))
    save_state(state_path, job.head, opt, job.fingerprint, progress)
    calibration = kind.calibrate(job.head, job.held)
    kind.save(out, job.head, job.config)
    return finish(cfg, job, data, out, progress, state["step"], calibration, t_start)
