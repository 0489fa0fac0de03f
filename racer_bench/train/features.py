"""Target features of the distillation sequences: one forward per sequence, stored once per
(layer set, sequence) so that every head, even trained side by side, reads them instead of
running its own forwards."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from racer_bench.engine.target import HFTarget, features
from racer_bench.errors import ConfigError
from racer_bench.system import files


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
    with files.replacing(file) as tmp:  # heads may build features side by side
        torch.save(feats, tmp)


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


def precompute_features(
    cfg: DictConfig, target: HFTarget, data: dict[str, Any], kinds: Callable[[], Sequence[Any]]
) -> int:
    """Store every sequence's features for the layer set of every head kind ``kinds()`` gives,
    one target forward per sequence (``features_only=true``: the heads trained afterwards, even
    side by side, then share them instead of each running its own forwards). Returns the
    sequences computed."""
    from tqdm import tqdm

    if not cfg.data.features:
        raise ConfigError("features_only=true needs data.features (a folder), not null")
    folder = Path(cfg.data.features).expanduser()
    sets = sorted({kind.feature_layers(target) for kind in kinds()})
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
