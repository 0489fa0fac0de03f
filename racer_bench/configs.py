"""Where things live (repository, config folder, cache) and the config keys shared by layers.

``REPO_ROOT`` is the checkout, ``CONF_DIR`` its Hydra config folder. The cache (dequantized
models, datastores, compiled kernels, checkpoints) defaults to ``DEFAULT_CACHE_DIR``;
:func:`cache_dir` reads ``$RACER_BENCH_CACHE`` first, as ``conf/paths/default.yaml`` does.

A method or task YAML may carry, besides its constructor's keys, how tables and figures show it:
``display_name`` (e.g. ``RACER``), ``display_order`` (its place in tables), ``display_color``
(its colour in figures) and, for a method, ``size_key`` (the key that sizes its draft). The
results side reads them from ``conf/`` (:mod:`racer_bench.analysis.names`); they are no
constructor argument, so :func:`constructor_node` drops them before a node is instantiated.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

REPO_ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = REPO_ROOT / "conf"
CACHE_ENV = "RACER_BENCH_CACHE"
DEFAULT_CACHE_DIR = "~/.cache/racer_bench"  # unexpanded, as configs and flags hold it
DEFAULT_MODELS_DIR = f"{DEFAULT_CACHE_DIR}/models"  # the model group's cache_dir
DISPLAY_KEYS = frozenset({"display_name", "display_order", "display_color", "size_key"})


def cache_dir() -> str:
    """The cache folder, unexpanded: ``$RACER_BENCH_CACHE``, else :data:`DEFAULT_CACHE_DIR`."""
    return os.environ.get(CACHE_ENV, DEFAULT_CACHE_DIR)


def task_max_new_tokens(task: Any, run_value: int) -> int:
    """A run's token limit per turn: the task's own ``max_new_tokens`` if set, else the run's."""
    return task.max_new_tokens or run_value


def constructor_node(node: Any) -> Any:
    """``node`` without the display keys (a copy; other values are returned unchanged)."""
    if not isinstance(node, DictConfig) or not DISPLAY_KEYS & set(node.keys()):
        return node
    kept = OmegaConf.masked_copy(node, [k for k in node if k not in DISPLAY_KEYS])
    # interpolations (${engine}) still resolve against the whole config, as in instantiate's copy
    kept._set_parent(node._get_parent())
    return kept
