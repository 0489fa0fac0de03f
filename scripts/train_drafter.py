"""Train a Medusa or EAGLE-3 draft head on the frozen target by self-distillation (CPU).

    python scripts/train_drafter.py kind=medusa
    python scripts/train_drafter.py kind=eagle3 train.max_minutes=15

The token dataset (the target's greedy answers to prompts disjoint from every evaluation set,
see :mod:`racer_bench.distill_data`) is built once at ``data.path`` and reused. Target features
are computed once per sequence; the head trains on them with AdamW, a progress bar, and a
resumable checkpoint (``<out>.state``) every ``train.save_every`` steps. The final head lands at
``out`` (default ``<cache_dir>/drafters/<model>/<method>.pt``), which ``method.checkpoint``
takes. Config: ``conf/train/config.yaml``.
"""

from __future__ import annotations

import json
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import hydra
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from methods.heads import (
    Eagle3Head,
    MedusaHeads,
    draft_labels,
    eagle3_config,
    eagle3_loss,
    frequent_tokens,
    medusa_loss,
    save_checkpoint,
)
from racer_bench.distill_data import build_dataset, load_dataset, prompt_texts, save_dataset
from racer_bench.engine.target import HFTarget, features
from racer_bench.errors import ConfigError
from racer_bench.runner import PathsConfig
from racer_bench.schema import (
    Instantiable,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Seed,
    check,
)


@dataclass
class DataConfig:
    """``data:`` of ``conf/train/config.yaml``."""

    path: str = ""
    n_code: PositiveInt | None = 48
    n_chat: PositiveInt | None = 24
    max_new_tokens: PositiveInt = 96
    batch_size: PositiveInt = 24


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


@dataclass
class OptimConfig:
    """``train:`` of ``conf/train/config.yaml``."""

    lr: PositiveFloat = 1e-3
    weight_decay: NonNegativeFloat = 0.0
    max_steps: PositiveInt = 4000
    max_minutes: PositiveFloat = 12.0
    save_every: PositiveInt = 200
    log_every: PositiveInt = 50


@dataclass
class TrainConfig:
    """Schema of ``conf/train/config.yaml`` (see :mod:`racer_bench.schema`)."""

    kind: Literal["medusa", "eagle3"] = "medusa"
    model_name: str = "smollm2_135m"
    num_threads: PositiveInt = 1
    seed: Seed = 0
    out: str = ""
    resume: bool = True
    data: DataConfig = field(default_factory=DataConfig)
    head: HeadConfig = field(default_factory=HeadConfig)
    train: OptimConfig = field(default_factory=OptimConfig)
    model: Instantiable = field(default_factory=dict)
    paths: PathsConfig = field(default_factory=PathsConfig)


def dataset(cfg: DictConfig, target: HFTarget) -> dict[str, Any]:
    """Load the self-distillation dataset, building it first if needed."""
    path = Path(cfg.data.path).expanduser()
    if path.exists():
        return load_dataset(path)
    t0 = time.time()
    texts = prompt_texts(cfg.data.n_code, cfg.data.n_chat)
    data = build_dataset(target, texts, cfg.data.max_new_tokens, cfg.data.batch_size)
    data["wall_s"] = time.time() - t0
    save_dataset(data, path)
    return data


def feature_layers(cfg: DictConfig, target: HFTarget) -> tuple[int, ...]:
    """HF ``hidden_states`` indices the head reads (empty = final normed state, Medusa)."""
    if cfg.kind == "medusa":
        return ()
    if cfg.head.feature_layers:
        return tuple(cfg.head.feature_layers)
    n = int(target.model.config.num_hidden_layers)
    return (min(2, n), max(n // 2, 1), max(n - 3, 1))  # EAGLE-3's low/mid/high


@torch.no_grad()
def target_features(target: HFTarget, seqs: list[list[int]], layers: tuple[int, ...]) -> list:
    """Per sequence FloatTensor[T, F] features of one full forward (computed once)."""
    out = []
    for seq in seqs:
        ids = torch.tensor([seq], device=target.device)
        res = target.body(input_ids=ids, output_hidden_states=bool(layers))
        out.append(features(res, layers).float().cpu().clone())
    return out


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
    config = eagle3_config(
        hidden, feat_size, target.vocab_size, num_heads=cfg.head.attn_heads,
        intermediate_size=cfg.head.intermediate_size,
        rope_theta=float(getattr(mc, "rope_theta", None) or 10000.0),
        rms_eps=float(getattr(mc, "rms_norm_eps", 1e-6)),
        feature_layers=feature_layers(cfg, target),
    )  # fmt: skip
    head = Eagle3Head(config, draft_ids)
    head.embed_tokens.weight.data.copy_(target.model.get_input_embeddings().weight.float().cpu())
    head.lm_head.weight.data.copy_(lm[draft_ids])
    return head, config


def step_loss(cfg: DictConfig, head: Any, feats: torch.Tensor, seq: list[int], labels) -> Any:
    if cfg.kind == "medusa":
        return medusa_loss(head, feats, labels)
    return eagle3_loss(head, feats, torch.tensor(seq), labels, steps=cfg.head.ttt_steps)


def train(cfg: DictConfig) -> dict[str, Any]:
    """The whole job; returns a summary (also written next to the checkpoint as JSON)."""
    from tqdm import tqdm

    torch.set_num_threads(cfg.num_threads)
    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    t_start = time.time()
    target: HFTarget = instantiate(cfg.model)
    data = dataset(cfg, target)
    seqs = [s for s in data["sequences"] if len(s) > 4]
    layers = feature_layers(cfg, target)
    feats = target_features(target, seqs, layers)
    draft_ids = frequent_tokens(seqs, cfg.head.draft_vocab, target.vocab_size)
    labels = [draft_labels(torch.tensor(s), draft_ids, target.vocab_size) for s in seqs]
    head, config = build_head(cfg, target, draft_ids, feats[0].shape[-1])
    params = [p for p in head.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
    out = Path(cfg.out).expanduser()
    state_path = out.with_suffix(".state")
    step, losses = _resume(cfg, state_path, head, opt)
    start = step
    t0, bar = time.time(), tqdm(total=cfg.train.max_steps, initial=step, desc=cfg.kind)
    while step < cfg.train.max_steps and time.time() - t0 < 60 * cfg.train.max_minutes:
        i = rng.randrange(len(seqs))
        loss = step_loss(cfg, head, feats[i], seqs[i], labels[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
        step += 1
        bar.update(1)
        if step % cfg.train.log_every == 0:
            bar.set_postfix(loss=f"{sum(losses[-cfg.train.log_every :]) / cfg.train.log_every:.3f}")
        if step % cfg.train.save_every == 0:
            _save_state(state_path, head, opt, step, losses)
    bar.close()
    _save_state(state_path, head, opt, step, losses)
    save_checkpoint(out, cfg.kind, config, head)
    summary = _summary(cfg, data, seqs, losses, step, time.time() - t0, time.time() - t_start)
    summary["resumed_from"] = start
    out.with_suffix(".json").write_text(json.dumps(summary, indent=1))
    return summary


def _resume(cfg: DictConfig, path: Path, head: Any, opt: Any) -> tuple[int, list[float]]:
    if not (cfg.resume and path.exists()):
        return 0, []
    state = torch.load(path, map_location="cpu", weights_only=False)
    head.load_state_dict(state["head"])
    opt.load_state_dict(state["opt"])
    return int(state["step"]), list(state["losses"])


def _save_state(path: Path, head: Any, opt: Any, step: int, losses: list[float]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"head": head.state_dict(), "opt": opt.state_dict(), "step": step,
                "losses": losses}, tmp)  # fmt: skip
    tmp.rename(path)


def _summary(cfg, data, seqs, losses, steps, train_s, total_s) -> dict[str, Any]:
    """Loss curve in tenths (mean loss of each tenth of the run) plus sizes and times."""
    tenth = max(len(losses) // 10, 1)
    curve = [sum(losses[i : i + tenth]) / len(losses[i : i + tenth])
             for i in range(0, len(losses), tenth)]  # fmt: skip
    return {
        "method": cfg.kind, "model": cfg.model_name, "steps": steps, "train_s": train_s,
        "total_s": total_s, "dataset_build_s": data.get("wall_s"), "sequences": len(seqs),
        "tokens": sum(len(s) for s in seqs), "loss_curve": curve,
    }  # fmt: skip


@hydra.main(version_base=None, config_path="../conf", config_name="train/config")
def main(cfg: DictConfig) -> None:
    try:
        check(cfg, TrainConfig)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    summary = train(cfg)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
