"""What one training run works on: the draft-head code handed in from ``methods/``
(:class:`Heads`), the distillation sequences, their samples and a fresh head (:class:`Job`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from racer_bench.engine.target import HFTarget
from racer_bench.train.distill_data import build_dataset, holdout_mask
from racer_bench.train.distill_prompts import distill_prompts
from racer_bench.train.features import cached_features
from racer_bench.train.state import training_fingerprint


@dataclass(frozen=True)
class Heads:
    """What the loop takes from the draft-head code of ``methods/`` (the script hands it in; the
    package never imports ``methods/``): the kind trained (a
    ``methods.common.heads.kind.HeadKind``),
    every registered kind (``features_only`` stores the features of all), the sample type the
    kinds read, and the draft vocabulary's helpers (``methods.common.draft_vocab``)."""

    kind: Any
    every_kind: Callable[[], Sequence[Any]]
    sample: Callable[..., Any]  # (features, ids, labels, prompt length) -> a kind's sample
    frequent_tokens: Callable[[list[list[int]], int, int], torch.Tensor]
    draft_labels: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]


@dataclass
class Job:
    """What one training run works on: the kind, its fresh head and the sequences."""

    kind: Any
    head: Any
    config: dict[str, Any]
    samples: list[Any]  # the kinds' samples (Heads.sample)
    held: list[Any]
    fingerprint: str


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


def make_samples(
    cfg: DictConfig,
    heads: Heads,
    target: HFTarget,
    data: dict[str, Any],
    layers: tuple[int, ...],
    draft_ids: torch.Tensor,
    rows: list[int],
) -> list[Any]:
    """The samples of sequences ``rows``: their features, ids and draft labels."""
    from tqdm import tqdm

    folder = Path(cfg.data.features).expanduser() if cfg.data.features else None
    out = []
    for i in tqdm(rows, desc="features", unit="seq"):
        seq = data["sequences"][i]
        labels = heads.draft_labels(torch.tensor(seq), draft_ids, target.vocab_size)
        labels[: data["prompt_lens"][i]] = -100  # learn the target's answers, not the prompts
        feats = cached_features(target, seq, layers, data["keys"][i], folder)
        out.append(heads.sample(feats, torch.tensor(seq), labels, data["prompt_lens"][i]))
    return out


def prepare(cfg: DictConfig, heads: Heads, target: HFTarget, data: dict[str, Any]) -> Job:
    """Split the sequences, build their samples and a fresh head of the kind trained."""
    kind = heads.kind
    usable = [i for i, s in enumerate(data["sequences"]) if len(s) > data["prompt_lens"][i] + 2]
    held_flags = holdout_mask([data["keys"][i] for i in usable], cfg.data.holdout)
    train_rows = [i for i, h in zip(usable, held_flags, strict=True) if not h]
    held_rows = [i for i, h in zip(usable, held_flags, strict=True) if h]
    layers = kind.feature_layers(target)
    draft_ids = heads.frequent_tokens([data["sequences"][i] for i in train_rows],
                                     cfg.head.draft_vocab, target.vocab_size)  # fmt: skip
    samples = make_samples(cfg, heads, target, data, layers, draft_ids, train_rows)
    held_rows = held_rows[: cfg.train.eval_sequences]
    held = make_samples(cfg, heads, target, data, layers, draft_ids, held_rows)
    head, config = kind.build(target, draft_ids, samples[0].feats.shape[-1])
    keys = [data["keys"][i] for i in train_rows]
    return Job(
        kind, head, config, samples, held, training_fingerprint(cfg.kind, config, draft_ids, keys)
    )
