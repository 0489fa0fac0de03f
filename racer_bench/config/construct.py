"""Building objects from config nodes, below every backend: :func:`construct` turns a group's
node into its object (a constructor's own ValueError becomes a one-line ConfigError naming the
group), and the config keys that several layers read.

A method or task YAML may carry, besides its constructor's keys, how tables and figures show it:
``display_name`` (e.g. ``RACER``), ``display_order`` (its place in tables), ``display_color``
(its colour in figures) and, for a method, ``size_key`` (the key that sizes its draft). The
results side reads them from ``conf/`` (:mod:`racer_bench.analysis.names`); they are no
constructor argument, so :func:`constructor_node` drops them before a node is instantiated.
"""

from __future__ import annotations

import sys
from typing import Any

from hydra.utils import get_object, instantiate
from omegaconf import DictConfig, OmegaConf

from racer_bench.errors import ConfigError, find_config_error

DISPLAY_KEYS = frozenset({"display_name", "display_order", "display_color", "size_key"})


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


def construct(node: DictConfig, group: str, **kwargs: Any) -> Any:
    """``instantiate(node)(**kwargs)``; a ValueError raised by the target's own module (its
    constructor's checks) becomes a one-line ConfigError naming the group.

    The schema catches a bad value of one key before anything loads; what it cannot express
    (keys that must agree, a file that must exist) is checked by the constructors. A ValueError
    raised deeper (a library, a bug) keeps its traceback.
    """
    try:
        made = instantiate(constructor_node(node))
        return made(**kwargs) if kwargs else made
    except Exception as error:
        cause = find_config_error(error) or _constructor_error(error, str(node._target_))
        if cause is None:
            raise
        message = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
        message = message if message.startswith(group) else f"{group}: {message}"
        raise ConfigError(message) from error


def _constructor_error(error: BaseException, target: str) -> ValueError | None:
    """The ValueError behind ``error`` if it was raised in the module defining ``target``."""
    current: BaseException | None = error
    while current is not None and not isinstance(current, ValueError):
        current = current.__cause__
    if current is None or current.__traceback__ is None:
        return None
    frame = current.__traceback__
    while frame.tb_next is not None:
        frame = frame.tb_next
    module = sys.modules.get(getattr(get_object(target), "__module__", ""))
    where = getattr(module, "__file__", None)
    return current if where and frame.tb_frame.f_code.co_filename == where else None
