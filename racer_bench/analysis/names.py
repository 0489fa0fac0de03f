"""How tables and figures show a method or task: read from its YAML, never listed here.

A method's YAML (``conf/method/<name>.yaml``) may set ``display_name``, ``display_order``,
``display_color`` and ``size_key``; a task's YAML ``display_name`` and ``display_order``
(:mod:`racer_bench.config.paths`). Without them a method or task is shown by its config name, after
the ordered ones. ``paths.CONF_DIR`` is read at each call, so a test may point it elsewhere.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from racer_bench.config import paths

UNORDERED = 10**6  # the rank of a method or task whose YAML sets no display_order


@dataclass(frozen=True)
class Display:
    """The display keys of one method or task YAML."""

    name: str
    order: int = UNORDERED
    color: str | None = None
    size_key: str | None = None


@functools.cache
def _group(conf_dir: Path, group: str) -> dict[str, Display]:
    out = {}
    for path in sorted((conf_dir / group).glob("*.yaml")):
        raw = OmegaConf.load(path)
        out[path.stem] = Display(
            name=str(raw.get("display_name") or path.stem),
            order=int(raw.get("display_order", UNORDERED)),
            color=raw.get("display_color"),
            size_key=raw.get("size_key"),
        )
    return out


def displays(group: str) -> dict[str, Display]:
    """Config name -> display keys, for every YAML of ``conf/<group>``."""
    return _group(paths.CONF_DIR, group)


def display(group: str, name: str) -> Display:
    return displays(group).get(name) or Display(name)


def method_name(method: str) -> str:
    """``RACER`` for ``racer``: the method YAML's ``display_name``, else the config name."""
    return display("method", method).name


def task_name(task: str) -> str:
    """``Spec-Bench`` for ``spec_bench``: the task YAML's ``display_name``, else the name."""
    return display("task", task).name


def method_rank(method: str) -> int:
    return display("method", method).order


def task_rank(task: str) -> int:
    return display("task", task).order


def size_key(method: str) -> str | None:
    """The method key that sizes its draft (``capacity``), or None when nothing sizes it."""
    return display("method", method).size_key


def method_colors() -> dict[str, str]:
    """Display name -> colour of the methods whose YAML sets ``display_color``."""
    return {d.name: d.color for d in displays("method").values() if d.color}
