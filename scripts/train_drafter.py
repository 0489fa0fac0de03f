"""Train a draft head (Medusa, EAGLE-3, DSpark, ...) on the frozen target by self-distillation.

    python scripts/train_drafter.py kind=dspark train.max_minutes=60
    python scripts/train_drafter.py kind=medusa data_only=true     # only build the data cache

A plain loop: data, optimiser, clock, evaluation, checkpoints. What differs between heads
(features read, the head, its loss, depth-1 logits, calibration, checkpoint) is the head
kind's (:mod:`methods.heads.kind`; ``kind`` names one of ``HEAD_KINDS`` or is ``module:Class``).

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

import csv
import hashlib
import itertools
import json
import os
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import hydra
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from methods.draft_vocab import draft_labels, frequent_tokens
from methods.heads.kind import HEAD_KINDS, HeadKind, Sample, head_kind
from racer_bench.config.schema import (
    Instantiable,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Probability,
    Seed,
    check,
)
from racer_bench.engine.target import HFTarget, features
from racer_bench.errors import ConfigError
from racer_bench.run.config import PathsConfig
from racer_bench.train.distill_data import build_dataset, holdout_mask
from racer_bench.train.distill_prompts import distill_prompts


@dataclass
class SourcesConfig:
    """``data.sources:`` prompts per source (null = all, 0 = none), distill_prompts.py."""

    code: NonNegativeInt | None = None
    mbpp: NonNegativeInt | None = None
    chat: NonNegativeInt | None = None
    math: NonNegativeInt | None = None


@dataclass
class DataConfig:
    """``data:`` of ``conf/train/config.yaml``."""

    cache: str = ""
    sources: SourcesConfig = field(default_factory=SourcesConfig)
    features: str | None = None
    max_new_tokens: PositiveInt = 256
    batch_size: PositiveInt = 32
    holdout: Probability = 0.05
    generate: bool = True
    shard_index: NonNegativeInt = 0
    shard_count: PositiveInt = 1


@dataclass
class HeadConfig:
    """``head:`` of ``conf/train/config.yaml``."""

    draft_vocab: PositiveInt = 2048
    num_heads: PositiveInt = 4
    num_layers: PositiveInt = 1
    attn_heads: PositiveInt = 8
    intermediate_size: PositiveInt = 1536
    feature_layers: list[NonNegativeInt] | None = None
    ttt_steps: PositiveInt = 3
    block_size: PositiveInt = 4
    block_layers: PositiveInt = 1
    markov_rank: PositiveInt = 128
    markov_gate: bool = True
    block_input: Literal["normed", "concat", "sum"] = "normed"
    block_decay: PositiveFloat = 0.8
    block_causal: bool = False
    root_anchors: NonNegativeInt | None = 0
    anchors: PositiveInt = 96
    conf_weight: NonNegativeFloat = 0.5
    init: Literal["random", "pass_last"] = "pass_last"


@dataclass
class OptimConfig:
    """``train:`` of ``conf/train/config.yaml``."""

    lr: PositiveFloat = 1e-3
    weight_decay: NonNegativeFloat = 0.0
    max_minutes: PositiveFloat = 12.0
    max_steps: PositiveInt | None = None
    save_every: PositiveInt = 200
    eval_every: PositiveInt = 200
    eval_sequences: PositiveInt = 16
    log_every: PositiveInt = 50


@dataclass
class TrainConfig:
    """Schema of ``conf/train/config.yaml`` (see :mod:`racer_bench.config.schema`)."""

    kind: str = "medusa"  # a key of methods.heads.kind.HEAD_KINDS or module:Class
    model_name: str = "smollm2_135m"
    num_threads: PositiveInt = 1
    seed: Seed = 0
    out: str = ""
    resume: bool = True
    data_only: bool = False
    features_only: bool = False
    data: DataConfig = field(default_factory=DataConfig)
    head: HeadConfig = field(default_factory=HeadConfig)
    train: OptimConfig = field(default_factory=OptimConfig)
    model: Instantiable = field(default_factory=dict)
    paths: PathsConfig = field(default_factory=PathsConfig)


def dataset(cfg: DictConfig, target: HFTarget) -> dict[str, Any]:
    """The distillation sequences, generating what the cache lacks."""
    sources = OmegaConf.to_container(cfg.data.sources)
    assert isinstance(sources, dict)
    prompts = distill_prompts(sources)  # type: ignore[arg-type]
    t0 = time.time()
    data = build_dataset(target, prompts, cfg.data.max_new_tokens, cfg.data.batch_size,
                         Path(cfg.data.cache).expanduser(), generate=cfg.data.generate,
                         shard=(cfg.data.shard_index, cfg.data.shard_count))  # fmt: skip
    data["wall_s"] = time.time() - t0
    return data


@torch.no_grad()
def target_features(
    target: HFTarget, seq: list[int], layer_sets: list[tuple[int, ...]]
) -> list[torch.Tensor]:
    """FloatTensor[T, F] (float16, to halve memory) per layer set, from one full forward."""
    ids = torch.tensor([seq], device=target.device)
    res = target.body(input_ids=ids, output_hidden_states=any(layer_sets))
    return [features(res, layers).to("cpu", torch.float16).clone() for layers in layer_sets]


def feature_file(folder: Path, layers: tuple[int, ...], key: str) -> Path:
    """Where the features of one sequence (cache key) for one layer set are stored."""
    return folder / ("layers_" + "_".join(map(str, layers or ("final",)))) / f"{key}.pt"


def stored_features(file: Path, length: int) -> torch.Tensor | None:
    """The stored features of a sequence of ``length`` tokens, or None if absent or stale."""
    if file.exists():
        feats = torch.load(file, weights_only=True)
        if len(feats) == length:
            return feats
    return None


def store_features(file: Path, feats: torch.Tensor) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_suffix(f".{os.getpid()}.tmp")  # heads may build features side by side
    torch.save(feats, tmp)
    tmp.rename(file)


def cached_features(
    target: HFTarget, seq: list[int], layers: tuple[int, ...], key: str, folder: Path | None
) -> torch.Tensor:
    """:func:`target_features`, stored once per (layers, sequence key) under ``folder``."""
    if folder is None:
        return target_features(target, seq, [layers])[0]
    file = feature_file(folder, layers, key)
    feats = stored_features(file, len(seq))
    if feats is None:
        feats = target_features(target, seq, [layers])[0]
        store_features(file, feats)
    return feats


def precompute_features(cfg: DictConfig, target: HFTarget, data: dict[str, Any]) -> int:
    """Store every sequence's features for every head's layer set, one target forward per
    sequence (``features_only=true``: the heads trained afterwards, even side by side, then
    share them instead of each running its own forwards). Returns the sequences computed."""
    from tqdm import tqdm

    if not cfg.data.features:
        raise ConfigError("features_only=true needs data.features (a folder), not null")
    folder = Path(cfg.data.features).expanduser()
    sets = sorted({head_kind(k)(cfg.head).feature_layers(target) for k in HEAD_KINDS})
    done = 0
    for seq, key in tqdm(list(zip(data["sequences"], data["keys"], strict=True)),
                         desc="features", unit="seq"):  # fmt: skip
        files = [feature_file(folder, layers, key) for layers in sets]
        missing = [i for i, f in enumerate(files) if stored_features(f, len(seq)) is None]
        if missing:
            for i, feats in zip(missing, target_features(target, seq, [sets[i] for i in missing]),
                                strict=True):  # fmt: skip
                store_features(files[i], feats)
            done += 1
    return done


def make_samples(
    cfg: DictConfig, target: HFTarget, data: dict, layers, draft_ids, rows: list[int]
) -> list[Sample]:
    from tqdm import tqdm

    folder = Path(cfg.data.features).expanduser() if cfg.data.features else None
    out = []
    for i in tqdm(rows, desc="features", unit="seq"):
        seq = data["sequences"][i]
        labels = draft_labels(torch.tensor(seq), draft_ids, target.vocab_size)
        labels[: data["prompt_lens"][i]] = -100  # learn the target's answers, not the prompts
        feats = cached_features(target, seq, layers, data["keys"][i], folder)
        out.append(Sample(feats, torch.tensor(seq), labels, data["prompt_lens"][i]))
    return out


@torch.no_grad()
def eval_loss(kind: HeadKind, head: Any, held: list[Sample], seed: int) -> float | None:
    """Mean loss over held-out sequences (fixed random choices), or None without any."""
    if not held:
        return None
    rng = random.Random(seed)
    losses = [float(kind.loss(head, s, rng)[0]) for s in held]
    return sum(losses) / len(losses)


@torch.no_grad()
def depth1_accuracy(kind: HeadKind, head: Any, held: list[Sample], k: int = 4) -> dict[str, float]:
    """Held-out teacher-forced acceptance of the first drafted position: ``acc1`` (argmax ==
    the target's token) and ``acc{k}`` (the target's token among the top ``k``) over every
    answer position; a token outside the draft vocabulary counts as a miss. Every kind answers
    the same question (:meth:`HeadKind.depth1_logits`), so the accuracies compare."""
    hits1 = hitsk = total = 0
    for s in held:
        logits, labels = kind.depth1_logits(head, s)
        top = logits.topk(min(k, logits.shape[-1]), -1).indices
        hits1 += int((top[:, 0] == labels).sum())
        hitsk += int((top == labels[:, None]).any(-1).sum())
        total += len(labels)
    return {"acc1": hits1 / max(total, 1), f"acc{k}": hitsk / max(total, 1)}


def evaluate(
    cfg: DictConfig, kind: HeadKind, head: Any, held: list[Sample], step: int
) -> dict[str, Any]:
    """One held-out evaluation: loss and depth-1 accuracies (head left in training mode)."""
    return {"step": step, "loss": eval_loss(kind, head, held, cfg.seed),
            **depth1_accuracy(kind, head, held)}  # fmt: skip


class ActiveClock:
    """Training seconds that leave out pauses (a SIGSTOP while a benchmark has the CPU).

    A step that takes over ``PAUSE_FACTOR`` times the median of the recent steps counts as that
    median, so ``train.max_minutes`` measures training, not time spent stopped.
    """

    PAUSE_FACTOR = 20.0

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds
        self._recent: list[float] = []
        self._t0 = 0.0

    def start(self) -> None:
        self._t0 = time.perf_counter()

    def stop(self) -> float:
        """End a step; returns the seconds counted for it."""
        dt = time.perf_counter() - self._t0
        if len(self._recent) >= 5:
            median = sorted(self._recent)[len(self._recent) // 2]
            if dt > self.PAUSE_FACTOR * median:
                dt = median
        self._recent = [*self._recent, dt][-50:]
        self.seconds += dt
        return dt


@dataclass
class Job:
    """What one training run works on: the kind, its fresh head and the sequences."""

    kind: HeadKind
    head: Any
    config: dict[str, Any]
    samples: list[Sample]
    held: list[Sample]
    fingerprint: str


def prepare(cfg: DictConfig, kind: HeadKind, target: HFTarget, data: dict[str, Any]) -> Job:
    """Split the sequences, build their samples and a fresh head of ``kind``."""
    usable = [i for i, s in enumerate(data["sequences"]) if len(s) > data["prompt_lens"][i] + 2]
    held_flags = holdout_mask([data["keys"][i] for i in usable], cfg.data.holdout)
    train_rows = [i for i, h in zip(usable, held_flags, strict=True) if not h]
    held_rows = [i for i, h in zip(usable, held_flags, strict=True) if h]
    layers = kind.feature_layers(target)
    draft_ids = frequent_tokens([data["sequences"][i] for i in train_rows], cfg.head.draft_vocab,
                                target.vocab_size)  # fmt: skip
    samples = make_samples(cfg, target, data, layers, draft_ids, train_rows)
    held = make_samples(cfg, target, data, layers, draft_ids, held_rows[: cfg.train.eval_sequences])
    head, config = kind.build(target, draft_ids, samples[0].feats.shape[-1])
    fingerprint = _fingerprint(cfg.kind, config, draft_ids, [data["keys"][i] for i in train_rows])
    return Job(kind, head, config, samples, held, fingerprint)


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
            _save_state(state_path, job.head, opt, job.fingerprint,
                        {"step": step, "log": log, "evals": evals,
                         "train_s": clock.seconds})  # fmt: skip
    bar.close()
    return {"step": step, "log": log, "evals": evals, "train_s": clock.seconds}


def train(cfg: DictConfig) -> dict[str, Any]:
    """The whole job; returns a summary (also written next to the checkpoint as JSON)."""
    kind = head_kind(cfg.kind)(cfg.head)
    torch.set_num_threads(cfg.num_threads)
    torch.manual_seed(cfg.seed)
    t_start = time.time()
    target: HFTarget = instantiate(cfg.model)
    data = dataset(cfg, target)
    if cfg.data_only or cfg.features_only:
        computed = precompute_features(cfg, target, data) if cfg.features_only else 0
        return {"sequences": len(data["sequences"]), "generated": data["generated"],
                "tokens": sum(map(len, data["sequences"])), "wall_s": data["wall_s"],
                "features_computed": computed}  # fmt: skip
    job = prepare(cfg, kind, target, data)
    params = [p for p in job.head.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
    out = Path(cfg.out).expanduser()
    state_path = out.with_suffix(".state")
    state = _resume(cfg, state_path, job.head, opt, job.fingerprint)
    progress = run_steps(cfg, job, opt, state_path, state)
    step, evals = progress["step"], progress["evals"]
    if job.held and (not evals or evals[-1]["step"] != step):
        evals.append(evaluate(cfg, kind, job.head, job.held, step))
    _save_state(state_path, job.head, opt, job.fingerprint, progress)
    calibration = kind.calibrate(job.head, job.held)
    kind.save(out, job.head, job.config)
    return finish(cfg, job, data, out, progress, state["step"], calibration, t_start)


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


def _fingerprint(kind: str, config: dict, draft_ids: torch.Tensor, keys: list[str]) -> str:
    """Identity of a training setup: a state is resumed only under the same one."""
    raw = json.dumps([kind, config, draft_ids.tolist(), sorted(keys)], default=str)
    return hashlib.sha1(raw.encode()).hexdigest()


def _resume(cfg: DictConfig, path: Path, head: Any, opt: Any, fingerprint: str) -> dict:
    fresh = {"step": 0, "log": [], "evals": [], "train_s": 0.0}
    if not (cfg.resume and path.exists()):
        return fresh
    state = torch.load(path, map_location="cpu", weights_only=False)
    if state.get("fingerprint") != fingerprint:
        raise ConfigError(
            f"resume: {path} was trained with other data or head settings; delete it, set "
            "resume=false, or set out=<another checkpoint path>"
        )
    head.load_state_dict(state["head"])
    opt.load_state_dict(state["opt"])
    return {**fresh, **{k: state[k] for k in fresh if k in state}}


def _save_state(path: Path, head, opt, fingerprint: str, progress: dict[str, Any]) -> None:
    """Head, optimiser, fingerprint and progress (step, log, evals, train_s), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"head": head.state_dict(), "opt": opt.state_dict(), "fingerprint": fingerprint,
                **progress}, tmp)  # fmt: skip
    tmp.rename(path)


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


@hydra.main(version_base=None, config_path="../conf", config_name="train/config")
def main(cfg: DictConfig) -> None:
    try:
        check(cfg, TrainConfig)
        summary = train(cfg)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    print(json.dumps({k: v for k, v in summary.items() if k != "eval_curve"}))


if __name__ == "__main__":
    main()
