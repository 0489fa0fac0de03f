"""The config folder, and the keys in it that describe a method or task to the results side.

A method or task YAML may carry, besides its constructor's keys, how tables and figures show it:
``display_name`` (e.g. ``RACER``), ``display_order`` (its place in tables), ``display_color``
(its colour in figures) and, for a method, ``size_key`` (the key that sizes its draft). The
results side reads them from ``conf/`` (:mod:`racer_bench.analysis.names`); they are no
constructor argument, so :func:`constructor_node` drops them before a node is instantiated.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
DISPLAY_KEYS = frozenset({"display_name", "display_order", "display_color", "size_key"})


def constructor_node(node: Any) -> Any:
    """``node`` without the display keys (a copy; other values are returned unchanged)."""
    if not isinstance(node, DictConfig) or not DISPLAY_KEYS & set(node.keys()):
        return node
    kept = OmegaConf.masked_copy(node, [k for k in node if k not in DISPLAY_KEYS])
    # interpolations (${engine}) still resolve against the whole config, as in instantiate's copy
    kept._set_parent(node._get_parent())
    return kept
