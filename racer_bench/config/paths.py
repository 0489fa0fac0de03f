"""Where things live: the checkout (``REPO_ROOT``), its Hydra config folder (``CONF_DIR``) and
the cache of dequantized models, datastores, compiled kernels and checkpoints
(``DEFAULT_CACHE_DIR``; :func:`cache_dir` reads ``$RACER_BENCH_CACHE`` first, as
``conf/paths/default.yaml`` does). Each is defined here only."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CONF_DIR = REPO_ROOT / "conf"
CACHE_ENV = "RACER_BENCH_CACHE"
DEFAULT_CACHE_DIR = "~/.cache/racer_bench"  # unexpanded, as configs and flags hold it
DEFAULT_MODELS_DIR = f"{DEFAULT_CACHE_DIR}/models"  # the model group's cache_dir


def cache_dir() -> str:
    """The cache folder, unexpanded: ``$RACER_BENCH_CACHE``, else :data:`DEFAULT_CACHE_DIR`."""
    return os.environ.get(CACHE_ENV, DEFAULT_CACHE_DIR)


@dataclass
class PathsConfig:
    """Schema of ``conf/paths/default.yaml``."""

    data_dir: str = "data"
    cache_dir: str = DEFAULT_CACHE_DIR
    results_dir: str = "results"
