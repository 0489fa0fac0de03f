"""Train a draft head (Medusa, EAGLE-3, DSpark, ...) on the frozen target by self-distillation.

    python scripts/train_drafter.py kind=dspark train.max_minutes=60
    python scripts/train_drafter.py kind=medusa data_only=true     # only build the data cache

The loop and its steps (data cache, held-out split, features, training with resumable states,
calibration, checkpoint, loss log, plot and summary): :mod:`racer_bench.train.loop`. What
differs between heads (features read, the head, its loss, depth-1 logits, calibration,
checkpoint) is the head kind's (:mod:`methods.common.heads.kind`; ``kind`` names one of
``HEAD_KINDS`` or is ``module:Class``); this script hands the kinds to the loop.
Config: ``conf/train/config.yaml``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import hydra
from omegaconf import DictConfig

from methods.common.draft_vocab import draft_labels, frequent_tokens
from methods.common.heads.kind import HEAD_KINDS, Sample, head_kind
from racer_bench.config.schema import check
from racer_bench.config.train import TrainConfig
from racer_bench.errors import ConfigError
from racer_bench.train import loop
from racer_bench.train.job import Heads


def heads(cfg: DictConfig) -> Heads:
    """The head kind ``cfg.kind`` and every registered one, with their sample type and draft
    vocabulary helpers."""
    return Heads(
        kind=head_kind(cfg.kind)(cfg.head),
        every_kind=lambda: [head_kind(k)(cfg.head) for k in HEAD_KINDS],
        sample=Sample,
        frequent_tokens=frequent_tokens,
        draft_labels=draft_labels,
    )


def train(cfg: DictConfig) -> dict[str, Any]:
    """The whole job (:func:`racer_bench.train.loop.train`) with the head kinds of ``methods/``."""
    return loop.train(cfg, heads(cfg))


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
