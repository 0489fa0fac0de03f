"""Copying finished run folders into ``results/curated/`` without machine paths: the data
directory becomes ``<data_dir>``, the home folder ``~`` and the repository root ``.``, so
committed records name no machine. Unfinished runs (``INCOMPLETE``) are refused."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import yaml

from racer_bench.config.paths import REPO_ROOT

RECORDS = ("prompts.jsonl", "summary.json", "manifest.json", "cost_profile.json", "cli.log")
HYDRA = ("config.yaml", "overrides.yaml", "hydra.yaml")
# a serving sweep's load-generator results (its summary is computed from them) and the prompts
# it sent; the servers' logs stay behind
RECORD_GLOBS = ("serve/*.json", "serve/*.jsonl")


def machine_paths(run: Path, dest: Path | None = None) -> list[tuple[str, str]]:
    """(absolute path, placeholder) pairs to replace, longest first: this checkout, the home
    folder, the data folder, the checkout the run was started from (Hydra's ``runtime.cwd``)
    and the run folder itself (which becomes its curated place)."""
    pairs = [(str(REPO_ROOT), "."), (str(Path.home()), "~")]
    started_in = _hydra_cwd(run)
    if started_in and started_in != "/":
        pairs.append((started_in, "."))
    if dest is not None:
        where = dest.resolve()
        shown = where.relative_to(REPO_ROOT) if where.is_relative_to(REPO_ROOT) else Path(dest.name)
        pairs.append((str(run.resolve()), str(shown)))
    manifest = run / "manifest.json"
    if manifest.exists():
        text = manifest.read_text(encoding="utf-8")
        data_dir = _find_key(json.loads(text), "data_dir")
        if data_dir and Path(data_dir).is_absolute():
            pairs.append((str(data_dir), "<data_dir>"))
    return sorted(pairs, key=lambda p: -len(p[0]))


def _hydra_cwd(run: Path) -> str | None:
    """The folder the run was started from, as Hydra recorded it (None if not recorded)."""
    path = run / ".hydra" / "hydra.yaml"
    if not path.exists():
        return None
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
        cwd = config["hydra"]["runtime"]["cwd"]
    except (yaml.YAMLError, KeyError, TypeError):
        return None
    return cwd if isinstance(cwd, str) and Path(cwd).is_absolute() else None


def _find_key(node: object, key: str) -> str | None:
    """The first value of ``key`` anywhere in a JSON tree."""
    if isinstance(node, dict):
        if isinstance(node.get(key), str):
            return node[key]
        children = node.values()
    elif isinstance(node, list):
        children = node
    else:
        return None
    for child in children:
        found = _find_key(child, key)
        if found:
            return found
    return None


def scrub(text: str, pairs: Sequence[tuple[str, str]]) -> str:
    for path, placeholder in pairs:
        text = text.replace(path, placeholder)
    return text


def curate(run: Path, dest: Path) -> Path:
    """Copy one finished run folder's records to ``dest`` with machine paths replaced."""
    if not (run / "summary.json").exists() or (run / "INCOMPLETE").exists():
        raise SystemExit(f"error: {run} is not a finished run folder")
    pairs = machine_paths(run, dest)
    globbed = [str(p.relative_to(run)) for g in RECORD_GLOBS for p in sorted(run.glob(g))]
    names = [*RECORDS, *(f".hydra/{n}" for n in HYDRA), *globbed]
    for name in names:
        src = run / name
        if not src.exists():
            continue
        out = dest / name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(scrub(src.read_text(encoding="utf-8"), pairs), encoding="utf-8")
    return dest
