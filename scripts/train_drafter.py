"""Train a Medusa, EAGLE-3 or DSpark draft head on the frozen target by self-distillation (CPU).

    python scripts/train_drafter.py kind=dspark train.max_minutes=60
    python scripts/train_drafter.py kind=medusa data_only=true     # only build the data cache

Steps: (1) the target's greedy continuations of the distillation prompts are read from, or
added to, the cache ``data.cache`` (resumable, shared by every head; see
:mod:`racer_bench.distill_data`); (2) ``data.holdout`` of the sequences are held out (loss
curve on unseen data; DSpark's confidence calibration); (3) target features are computed once
per sequence; (4) the head trains with AdamW until ``train.max_minutes`` of training time in
total (over all resumed runs) or ``train.max_steps``; a resumable state ``<out>.state`` is
written every ``train.save_every`` steps and at the end; (5) DSpark's confidence temperatures
are fitted on the held-out sequences; (6) the head is written to ``out`` (what
``method.checkpoint`` takes), the loss log to ``<out>.losses.csv``, a plot to
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

from methods.calibration import expected_calibration_error, sequential_temperatures, survival
from methods.draft_vocab import draft_labels, frequent_tokens
from methods.dspark_head import (
    DSparkHead,
    block_outputs,
    dspark_config,
    dspark_loss,
    pass_last_feature,
)
from methods.eagle3_head import Eagle3Head, eagle3_config, eagle3_loss, eagle3_step_logits
from methods.head_checkpoint import save_checkpoint
from methods.medusa_head import MedusaHeads, medusa_loss
from racer_bench.distill_data import build_dataset, holdout_mask
from racer_bench.distill_prompts import distill_prompts
from racer_bench.engine.target import HFTarget, features
from racer_bench.errors import ConfigError
from racer_bench.runner import PathsConfig
from racer_bench.schema import (
    Instantiable,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Probability,
    Seed,
    check,
)

KINDS = ("medusa", "eagle3", "dspark")


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
    """Schema of ``conf/train/config.yaml`` (see :mod:`racer_bench.schema`)."""

    kind: Literal["medusa", "eagle3", "dspark"] = "medusa"
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


@dataclass
class Sample:
    """One training sequence: features FloatTensor[T, F] (float16), ids and draft labels [T]."""

    feats: torch.Tensor
    ids: torch.Tensor
    labels: torch.Tensor  # -100 in the prompt (not the target's own output) and off-vocabulary
    prompt_len: int


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


def feature_layers(cfg: DictConfig, target: HFTarget, kind: str | None = None) -> tuple[int, ...]:
    """HF ``hidden_states`` indices the head ``kind`` (default ``cfg.kind``) reads (empty =
    final normed state, Medusa)."""
    if (kind or cfg.kind) == "medusa":
        return ()
    if cfg.head.feature_layers:
        return tuple(cfg.head.feature_layers)
    n = int(target.model.config.num_hidden_layers)
    return (min(2, n), max(n // 2, 1), max(n - 3, 1))  # EAGLE-3's low/mid/high


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
    sets = sorted({feature_layers(cfg, target, kind) for kind in KINDS})
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


def build_head(cfg: DictConfig, target: HFTarget, draft_ids: torch.Tensor, feat_size: int):
    """A fresh head whose LM head (and embedding) start from the target's."""
    lm = target.head.weight.detach().float().cpu()
    hidden = lm.shape[1]
    if cfg.kind == "medusa":
        head = MedusaHeads(hidden, cfg.head.num_heads, cfg.head.num_layers, draft_ids)
        head.lm_head.weight.data.copy_(lm[draft_ids])
        config = {"hidden_size": hidden, "num_heads": cfg.head.num_heads,
                  "num_layers": cfg.head.num_layers}  # fmt: skip
        return head, config
    mc = target.model.config
    common = {
        "num_heads": cfg.head.attn_heads,
        "intermediate_size": cfg.head.intermediate_size,
        "rope_theta": float(getattr(mc, "rope_theta", None) or 10000.0),
        "rms_eps": float(getattr(mc, "rms_norm_eps", 1e-6)),
        "feature_layers": feature_layers(cfg, target),
    }
    if cfg.kind == "eagle3":
        config = eagle3_config(hidden, feat_size, target.vocab_size, **common)
        head: Any = Eagle3Head(config, draft_ids)
    else:
        config = dspark_config(
            hidden, feat_size, target.vocab_size, block_size=cfg.head.block_size,
            num_layers=cfg.head.block_layers, markov_rank=cfg.head.markov_rank,
            markov_gate=cfg.head.markov_gate, block_input=cfg.head.block_input,
            causal=cfg.head.block_causal, **common,
        )  # fmt: skip
        head = DSparkHead(config, draft_ids)
        if cfg.head.init == "pass_last":
            pass_last_feature(head)
    head.embed_tokens.weight.data.copy_(target.model.get_input_embeddings().weight.float().cpu())
    head.lm_head.weight.data.copy_(lm[draft_ids])
    return head, config


def anchors(sample: Sample, count: int | None, rng: random.Random) -> torch.Tensor:
    """Block roots whose labels lie in the target's own continuation: LongTensor[A]."""
    first = max(sample.prompt_len - 1, 1)
    pool = list(range(first, len(sample.ids) - 1))
    if count is not None and len(pool) > count:
        pool = sorted(rng.sample(pool, count))
    return torch.tensor(pool, dtype=torch.long)


def step_loss(
    cfg: DictConfig, head: Any, sample: Sample, rng: random.Random
) -> tuple[torch.Tensor, dict[str, float]]:
    """The head's loss on one sequence and its logged parts."""
    feats = sample.feats.float()
    if cfg.kind == "medusa":
        return medusa_loss(head, feats, sample.labels), {}
    if cfg.kind == "eagle3":
        return eagle3_loss(head, feats, sample.ids, sample.labels, steps=cfg.head.ttt_steps), {}
    roots = anchors(sample, cfg.head.anchors, rng)
    if not len(roots):
        return feats.new_zeros((), requires_grad=True), {}
    solo = None
    if cfg.head.root_anchors != 0:  # one-row blocks at other answer positions (null = all)
        rest = sorted(set(anchors(sample, None, rng).tolist()) - set(roots.tolist()))
        count = len(rest) if cfg.head.root_anchors is None else cfg.head.root_anchors
        solo = torch.tensor(sorted(rng.sample(rest, min(count, len(rest)))), dtype=torch.long)
    return dspark_loss(head, feats, sample.ids, sample.labels, roots, decay=cfg.head.block_decay,
                       conf_weight=cfg.head.conf_weight, root_anchors=solo)  # fmt: skip


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
def eval_loss(cfg: DictConfig, head: Any, held: list[Sample]) -> float | None:
    """Mean loss over held-out sequences (fixed anchors), or None without any."""
    if not held:
        return None
    rng = random.Random(cfg.seed)
    losses = [float(step_loss(cfg, head, s, rng)[0]) for s in held]
    return sum(losses) / len(losses)


@torch.no_grad()
def depth1_logits(kind: str, head: Any, sample: Sample) -> tuple[torch.Tensor, torch.Tensor]:
    """The head's teacher-forced logits for the first drafted position after every root in the
    answer: FloatTensor[N, Vd] and draft labels LongTensor[N] (-100: not draftable).

    Root ``t`` (``prompt_len <= t <= T - 2``) is the token the target just committed; the head
    has the target's features up to ``t - 1`` and predicts the token at ``t + 1``, the same
    question for every kind, so the accuracies are comparable across heads.
    """
    feats, first, n = sample.feats.float(), sample.prompt_len, len(sample.ids)
    roots = torch.arange(first, n - 1)
    if kind == "medusa":  # head 0 at position t - 1 predicts t + 1 (it never sees the root)
        logits = head.lm_head(head.blocks[0](feats[roots - 1]))
    elif kind == "eagle3":  # pair t - 1 = (feats[t - 1], ids[t]) predicts t + 1
        logits = eagle3_step_logits(head, feats, sample.ids, 1)[0][roots - 1]
    else:
        logits = block_outputs(head, feats, sample.ids, sample.labels, roots)["logits"][:, 0]
    return logits, sample.labels[roots + 1]


def depth1_accuracy(kind: str, head: Any, held: list[Sample], k: int = 4) -> dict[str, float]:
    """Held-out teacher-forced acceptance of the first drafted position: ``acc1`` (argmax ==
    the target's token) and ``acc{k}`` (the target's token among the top ``k``) over every
    answer position; a token outside the draft vocabulary counts as a miss."""
    hits1 = hitsk = total = 0
    for s in held:
        logits, labels = depth1_logits(kind, head, s)
        top = logits.topk(min(k, logits.shape[-1]), -1).indices
        hits1 += int((top[:, 0] == labels).sum())
        hitsk += int((top == labels[:, None]).any(-1).sum())
        total += len(labels)
    return {"acc1": hits1 / max(total, 1), f"acc{k}": hitsk / max(total, 1)}


def evaluate(cfg: DictConfig, head: Any, held: list[Sample], step: int) -> dict[str, Any]:
    """One held-out evaluation: loss and depth-1 accuracies (head left in training mode)."""
    return {"step": step, "loss": eval_loss(cfg, head, held),
            **depth1_accuracy(cfg.kind, head, held)}  # fmt: skip


@torch.no_grad()
def calibrate(head: DSparkHead, held: list[Sample], per_sequence: int = 128) -> dict[str, Any]:
    """Fit DSpark's confidence temperatures on held-out blocks; returns before/after metrics."""
    rng = random.Random(0)
    logits, accepted, inside = [], [], []
    for s in held:
        roots = anchors(s, per_sequence, rng)
        if len(roots):
            out = block_outputs(head, s.feats.float(), s.ids, s.labels, roots)
            logits.append(out["conf_logit"])
            accepted.append(out["accepted"])
            inside.append(out["inside"])
    if not logits:
        return {"calibrated": False}
    z, acc, valid = torch.cat(logits), torch.cat(accepted), torch.cat(inside)
    temps = sequential_temperatures(z, acc, valid)
    head.conf_temperature.copy_(temps)
    alive = acc.long().cumprod(-1).bool()
    before, after = survival(z, torch.ones_like(temps)), survival(z, temps)
    ece = [[expected_calibration_error(s[valid[:, k], k], alive[valid[:, k], k])
            for k in range(z.shape[1])] for s in (before, after)]  # fmt: skip
    return {
        "calibrated": True, "blocks": len(z), "temperatures": temps.tolist(),
        "ece_survival_before": ece[0], "ece_survival_after": ece[1],
        "conditional_acceptance": conditional_acceptance(acc, valid),
        "chain_accepted_mean": float(alive[valid.all(-1)].float().sum(-1).mean()),
        "predicted_chain_accepted_mean": float(after[valid.all(-1)].sum(-1).mean()),
    }  # fmt: skip


def conditional_acceptance(accepted: torch.Tensor, valid: torch.Tensor) -> list[float | None]:
    """Per position k, the acceptance rate among blocks whose positions before k were all
    accepted (teacher-forced): what a verifier sees at depth k + 1 of a chain."""
    alive = torch.ones(len(accepted), dtype=torch.bool)
    rates: list[float | None] = []
    for k in range(accepted.shape[1]):
        rows = valid[:, k] & alive
        rates.append(float(accepted[rows, k].float().mean()) if rows.any() else None)
        alive = alive & accepted[:, k]
    return rates


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


def train(cfg: DictConfig) -> dict[str, Any]:
    """The whole job; returns a summary (also written next to the checkpoint as JSON)."""
    from tqdm import tqdm

    if cfg.kind not in KINDS:
        raise ConfigError(f"kind={cfg.kind}: allowed values are {', '.join(KINDS)}")
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
    usable = [i for i, s in enumerate(data["sequences"]) if len(s) > data["prompt_lens"][i] + 2]
    held_flags = holdout_mask([data["keys"][i] for i in usable], cfg.data.holdout)
    train_rows = [i for i, h in zip(usable, held_flags, strict=True) if not h]
    held_rows = [i for i, h in zip(usable, held_flags, strict=True) if h]
    layers = feature_layers(cfg, target)
    draft_ids = frequent_tokens([data["sequences"][i] for i in train_rows], cfg.head.draft_vocab,
                                target.vocab_size)  # fmt: skip
    samples = make_samples(cfg, target, data, layers, draft_ids, train_rows)
    held = make_samples(cfg, target, data, layers, draft_ids, held_rows[: cfg.train.eval_sequences])
    head, config = build_head(cfg, target, draft_ids, samples[0].feats.shape[-1])
    params = [p for p in head.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
    out = Path(cfg.out).expanduser()
    state_path = out.with_suffix(".state")
    fingerprint = _fingerprint(cfg.kind, config, draft_ids, [data["keys"][i] for i in train_rows])
    state = _resume(cfg, state_path, head, opt, fingerprint)
    start, step, log, evals = state["step"], state["step"], state["log"], state["evals"]
    rng = random.Random(cfg.seed + step)
    budget_s = 60.0 * cfg.train.max_minutes
    max_steps = cfg.train.max_steps or float("inf")
    clock = ActiveClock(state["train_s"])
    total = cfg.train.max_steps or None
    bar = tqdm(total=total, initial=step, desc=cfg.kind)
    while step < max_steps and clock.seconds < budget_s:
        clock.start()
        loss, parts = step_loss(cfg, head, samples[rng.randrange(len(samples))], rng)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        clock.stop()
        log.append({"step": step, "time_s": round(clock.seconds, 3),
                    "loss": float(loss), **parts})  # fmt: skip
        bar.update(1)
        if step % cfg.train.log_every == 0:
            recent = [r["loss"] for r in log[-cfg.train.log_every :]]
            bar.set_postfix(loss=f"{sum(recent) / len(recent):.3f}")
        if step % cfg.train.eval_every == 0 and held:
            evals.append(evaluate(cfg, head, held, step))
        if step % cfg.train.save_every == 0:
            _save_state(state_path, head, opt, fingerprint,
                        {"step": step, "log": log, "evals": evals,
                         "train_s": clock.seconds})  # fmt: skip
    bar.close()
    trained_s = clock.seconds
    if held and (not evals or evals[-1]["step"] != step):
        evals.append(evaluate(cfg, head, held, step))
    _save_state(state_path, head, opt, fingerprint,
                {"step": step, "log": log, "evals": evals, "train_s": trained_s})  # fmt: skip
    calibration = calibrate(head, held) if cfg.kind == "dspark" else None
    save_checkpoint(out, cfg.kind, config, head)
    write_log(out.with_suffix(".losses.csv"), log)
    plot_curves(out.with_suffix(".loss.png"), log, evals, f"{cfg.kind} on {cfg.model_name}")
    summary = _summary(cfg, data, samples, log, step, trained_s, time.time() - t_start)
    summary.update(resumed_from=start, held_out_sequences=len(held), eval_curve=evals)
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
