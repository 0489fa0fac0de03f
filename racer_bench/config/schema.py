"""Config schemas: the type and allowed range of every config key, checked before anything loads.

Where a key's schema lives (one source of truth, next to the code that takes the key):

* A node with ``_target_`` (a model, method, verifier, task or scheduler, and nested ones such
  as SpS's ``draft_model``) is described by its target's signature: every YAML key is a
  parameter, and the parameter's annotation is the key's type and range, e.g.
  ``capacity: PositiveInt = 63``. A class's keys are the parameters of its ``__init__`` and,
  while that takes ``**kwargs``, of the ``__init__`` methods up its MRO. So a new method is still
  one module + one YAML: annotating its constructor is declaring its schema.
* A node without ``_target_`` (run-level keys, ``logger``, ``paths``) is described by a
  dataclass: :class:`racer_bench.config.run.RunConfig` for ``conf/config.yaml``, whose fields name
  the dataclasses of the groups below it.
* Numbers always carry a range: ``annotated_types`` constraints (``Ge``, ``Gt``, ``Le``, ``Lt``,
  ``Interval``), usually through the aliases below. ``tests/unit/test_config_schema.py`` walks
  every YAML under ``conf/`` and fails for a key without a declared type or a number without a
  range, then sets each number out of its range and expects a one-line error.

:func:`check` raises :class:`ConfigError` with one line naming the key and what is allowed.
Values are checked by pydantic in strict mode: an integer is a valid float, but a float or a
bool is not a valid integer and a string is never a number.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

from annotated_types import Ge, Gt, Interval, Le, Lt
from omegaconf import DictConfig, ListConfig, OmegaConf
from pydantic import ConfigDict, TypeAdapter, ValidationError

from racer_bench.config.construct import DISPLAY_KEYS
from racer_bench.errors import ConfigError, find_config_error

PositiveInt = Annotated[int, Ge(1)]
NonNegativeInt = Annotated[int, Ge(0)]
PositiveFloat = Annotated[float, Gt(0)]
NonNegativeFloat = Annotated[float, Ge(0)]
Probability = Annotated[float, Interval(ge=0, le=1)]
Seed = Annotated[int, Ge(0)]
Instantiable = Annotated[dict[str, Any], "a config node with _target_"]

# Hydra's own keys, and the keys that show a method or task in tables (no constructor argument)
RESERVED_KEYS = (
    frozenset({"_target_", "_partial_", "_recursive_", "_convert_", "_args_"}) | DISPLAY_KEYS
)
BOUNDS = (Ge, Gt, Le, Lt, Interval)
_STRICT = ConfigDict(strict=True, arbitrary_types_allowed=True)
_NOUNS = {int: ("an integer", "integers"), float: ("a number", "numbers"),
          str: ("a string", "strings"), bool: ("true or false", "booleans")}  # fmt: skip


# ------------------------------------------------------------------ what a schema declares
def keys_of(schema: Any) -> dict[str, Any]:
    """Key -> annotation: a dataclass's fields, or the parameters of a callable or class."""
    if dataclasses.is_dataclass(schema) and isinstance(schema, type):
        hints = get_type_hints(schema, include_extras=True)
        return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(schema)}
    if not isinstance(schema, type):
        return _parameters(schema)[0]
    keys: dict[str, Any] = {}
    for klass in schema.__mro__:
        if klass is object or "__init__" not in vars(klass):
            continue
        own, takes_more = _parameters(klass.__init__)
        keys = {**own, **keys}  # a subclass's annotation wins
        if not takes_more:
            break
    return keys


def _parameters(fn: Callable[..., Any]) -> tuple[dict[str, Any], bool]:
    """Named parameters of ``fn`` with their annotations, and whether it takes ``**kwargs``."""
    hints = get_type_hints(fn, include_extras=True)
    params = inspect.signature(fn).parameters.values()
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    keys = {p.name: hints.get(p.name, Any) for p in params if p.kind in named and p.name != "self"}
    return keys, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def target_of(node: DictConfig, where: str) -> Any | None:
    """The object named by the node's ``_target_`` (imported), or None without one."""
    name = node.get("_target_") if "_target_" in node else None
    if name is None:
        return None
    from hydra.utils import get_object

    try:
        return get_object(str(name))
    except Exception as error:
        raise ConfigError(f"{where}_target_={name}: cannot be imported ({error})") from None


def bounds(tp: Any) -> list[Any]:
    """The range constraints on the number (or list element) that ``tp`` allows."""
    origin = get_origin(tp)
    if origin is Annotated:
        base, *meta = get_args(tp)
        return [m for m in meta if isinstance(m, BOUNDS)] or bounds(base)
    if _is_union(tp) or origin in (list, Sequence, tuple):
        return [b for arg in get_args(tp) for b in bounds(arg)]
    return []


def core_type(tp: Any) -> Any:
    """``tp`` without Annotated, None and list wrappers (``list[PositiveInt] | None``: int)."""
    if get_origin(tp) is Annotated:
        return core_type(get_args(tp)[0])
    if _is_union(tp):
        args = [a for a in get_args(tp) if a is not type(None)]
        return core_type(args[0]) if len(args) == 1 else tp
    if get_origin(tp) in (list, Sequence, tuple):
        return core_type(get_args(tp)[0])
    return tp


# ------------------------------------------------------------------ checking a config
def check(cfg: DictConfig, schema: Any, path: str = "") -> None:
    """Raise a one-line :class:`ConfigError` for the first key of ``cfg`` that ``schema``
    (or the node's own ``_target_``) does not declare or whose value is not allowed."""
    target = target_of(cfg, path)
    declared = keys_of(target if target is not None else schema)
    owner = getattr(target or schema, "__qualname__", str(target or schema))
    # plain keys before config nodes, so a key a node interpolates (an experiment's
    # task_limits read by task.limit) is the one named when it is wrong
    for key in sorted(map(str, cfg), key=lambda k: _is_node(cfg, k)):
        where = f"{path}{key}"
        if key in RESERVED_KEYS:
            continue
        if key not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise ConfigError(f"{where}: unknown key (keys of {owner}: {known})")
        tp, value = declared[key], _resolved(cfg, key, where)
        if isinstance(value, DictConfig) and ("_target_" in value or _is_schema(tp)):
            check(value, tp, f"{where}.")
        elif isinstance(value, DictConfig) and _entries_of(tp) is not None:
            for entry in map(str, value):  # dict[str, V]: each entry named when it is wrong
                check_value(_entries_of(tp), _resolved(value, entry, f"{where}.{entry}"),
                            f"{where}.{entry}")  # fmt: skip
        else:
            check_value(tp, value, where)


def _entries_of(tp: Any) -> Any:
    """V of a ``dict[str, V]`` type (None for any other type)."""
    core = core_type(tp)
    if get_origin(core) is dict and len(get_args(core)) == 2:
        return get_args(core)[1]
    return None


def _is_node(cfg: DictConfig, key: str) -> bool:
    """Whether ``cfg[key]`` is a config node with a ``_target_`` (read without resolving)."""
    node = cfg._get_node(key)
    return isinstance(node, DictConfig) and not node._is_interpolation() and "_target_" in node


def check_value(tp: Any, value: Any, where: str) -> None:
    """Raise a one-line :class:`ConfigError` unless ``value`` is allowed by ``tp``."""
    if isinstance(value, (DictConfig, ListConfig)):
        value = OmegaConf.to_container(value, resolve=True)
    if value == "???":
        raise ConfigError(f"{where}: required, set {where}=<value>")
    if tp is Instantiable and (not isinstance(value, dict) or "_target_" not in value):
        raise ConfigError(f"{where}: must be a config node with _target_")
    try:
        _adapter(tp).validate_python(value)
    except ValidationError:
        shown = f"{where}={format_value(value)}"
        if get_origin(core_type(tp)) is Literal:
            raise ConfigError(f"{shown}: allowed values are {_choices(tp)}") from None
        raise ConfigError(f"{shown}: must be {describe(tp)}") from None


def _resolved(cfg: DictConfig, key: str, where: str) -> Any:
    """``cfg[key]`` with its interpolations resolved; resolver errors become ConfigError."""
    if OmegaConf.is_missing(cfg, key):
        raise ConfigError(f"{where}: required, set {where}=<value>")
    try:
        return cfg[key]
    except Exception as error:
        config_error = find_config_error(error)
        if config_error is not None:
            raise config_error from None
        raise ConfigError(f"{where}: {str(error).splitlines()[0]}") from None


@functools.cache
def _adapter(tp: Any) -> TypeAdapter[Any]:
    return TypeAdapter(tp, config=_STRICT)


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def _is_schema(tp: Any) -> bool:
    return dataclasses.is_dataclass(tp) and isinstance(tp, type)


# ------------------------------------------------------------------ one-line descriptions
def describe(tp: Any, plural: bool = False) -> str:
    """What ``tp`` allows, in words: ``an integer >= 1 or null``, ``a number in [0, 1]``."""
    origin = get_origin(tp)
    if origin is Annotated:
        base, *meta = get_args(tp)
        ranges = " ".join(_range_text(m) for m in meta if isinstance(m, BOUNDS))
        text = next((m for m in meta if isinstance(m, str)), None)
        return text or " ".join(filter(None, (describe(base, plural), ranges)))
    if _is_union(tp):
        args = get_args(tp)
        text = " or ".join(describe(a, plural) for a in args if a is not type(None))
        return f"{text} or null" if type(None) in args else text
    if origin is Literal:
        return f"one of {_choices(tp)}"
    if origin in (list, Sequence, tuple):
        return f"a list of {describe(get_args(tp)[0], plural=True)}" if get_args(tp) else "a list"
    if origin in (dict, Mapping) or tp is dict:
        return "a mapping"
    if tp in _NOUNS:
        return _NOUNS[tp][plural]
    return "anything" if tp is Any else f"a {getattr(tp, '__name__', tp)}"


def _range_text(bound: Any) -> str:
    """``>= 1``, ``< 5`` or, for an interval with both ends, ``in [0, 1)``."""
    if not isinstance(bound, Interval):
        symbol = {Ge: ">=", Gt: ">", Le: "<=", Lt: "<"}[type(bound)]
        return f"{symbol} {_limit(bound)}"
    low = ("[", bound.ge) if bound.ge is not None else ("(", bound.gt)
    high = (bound.le, "]") if bound.le is not None else (bound.lt, ")")
    if low[1] is not None and high[0] is not None:
        return f"in {low[0]}{low[1]}, {high[0]}{high[1]}"
    parts = (Ge(bound.ge), Gt(bound.gt), Le(bound.le), Lt(bound.lt))
    return " and ".join(_range_text(b) for b in parts if _limit(b) is not None)


def _limit(bound: Ge | Gt | Le | Lt) -> Any:
    """The number of a one-sided bound (``Ge(1).ge``)."""
    return getattr(bound, type(bound).__name__.lower())


def _choices(tp: Any) -> str:
    if get_origin(tp) is Annotated:
        return _choices(get_args(tp)[0])
    if _is_union(tp):
        parts = [_choices(a) for a in get_args(tp) if a is not type(None)]
        return ", ".join([*parts, "null"] if type(None) in get_args(tp) else parts)
    return ", ".join(format_value(v) for v in get_args(tp))


def format_value(value: Any) -> str:
    """A value as it would be typed on the command line (``null``, ``true``, ``[1, 2]``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    return str(value)
