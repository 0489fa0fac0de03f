"""Numbers the papers report, with their citations, read from ``data/paper_numbers.yaml``.

These are facts from the cited papers and leaderboards, shown beside ours in separate table
columns; the data file says where each comes from and which values are approximate.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DATA_FILE = Path(__file__).resolve().parent / "data" / "paper_numbers.yaml"


@dataclass(frozen=True)
class Source:
    """Where a reported number comes from."""

    short: str  # column label
    citation: str  # full reference
    setting: str  # model, hardware and decoding setting of the numbers


@dataclass(frozen=True)
class Reported:
    """One reported number: ``text`` as it should be printed, ``value`` when it is one number."""

    text: str
    value: float | None = None


@functools.cache
def _data() -> dict[str, Any]:
    return yaml.safe_load(DATA_FILE.read_text(encoding="utf-8"))


def _reported(node: Any) -> Any:
    """``{text, value}`` mappings as :class:`Reported`, at any depth; other values as they are."""
    if isinstance(node, dict) and "text" in node:
        return Reported(str(node["text"]), node.get("value"))
    if isinstance(node, dict):
        return {str(key): _reported(value) for key, value in node.items()}
    return node


def sources() -> dict[str, Source]:
    """Source key (e.g. ``spec_bench``) -> its label, citation and setting."""
    return {key: Source(**value) for key, value in _data()["sources"].items()}


def table(name: str) -> dict[str, Any]:
    """One table of reported numbers, e.g. ``spec_bench_leaderboard`` (method -> metric ->
    :class:`Reported`)."""
    return _reported(_data()["tables"][name])


def column(source: str) -> str:
    """Column header of a source's numbers, e.g. ``"Spec-Bench leaderboard"``."""
    return sources()[source].short


def citations(keys: list[str]) -> list[str]:
    """One note per source: its label, setting and reference."""
    known = sources()
    return [f"{known[k].short}: {known[k].setting}. {known[k].citation}." for k in keys]
