"""``conf/train/config.yaml``: the schema of the draft heads' training config
(:class:`TrainConfig`, read by ``scripts/train_drafter.py``) and of its groups (``data:``,
``head:``, ``train:``), checked by :mod:`racer_bench.config.schema` before anything loads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from racer_bench.config.paths import PathsConfig
from racer_bench.config.schema import (
    Instantiable,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Probability,
    Seed,
)


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

    kind: str = "medusa"  # a key of methods.common.heads.kind.HEAD_KINDS or module:Class
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
