"""What a run is called: its method's display name, verifier, scheduler and the values it
changed from the YAML defaults of this checkout's ``conf/``; its draft size and its hardware."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from racer_bench.analysis import names
from racer_bench.analysis.runs import Run
from racer_bench.config import paths
from racer_bench.config.construct import DISPLAY_KEYS

log = logging.getLogger(__name__)
SKIP_KEYS = ("_target_", "_partial_", *sorted(DISPLAY_KEYS))  # not a setting of the run


def flatten(config: dict[str, Any], prefix: str) -> dict[str, Any]:
    """Scalar leaves of a nested config as ``{"<prefix>.<dotted key>": value}``."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if key in SKIP_KEYS:
            continue
        name = f"{prefix}.{key}"
        if isinstance(value, dict):
            out |= flatten(value, name)
        elif not isinstance(value, list):
            out[name] = value
    return out


def resolved_group(
    group: str,
    choice: str | None,
    conf_dir: Path | None = None,
    context: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``conf/<group>/<choice>.yaml`` as a nested dict, its interpolations resolved.

    Interpolations (e.g. the ``${by_hardware:${hardware},15,63}`` capacities) are resolved
    against ``context``, a run's top-level config; those that cannot be resolved are dropped.
    """
    path = (conf_dir or paths.CONF_DIR) / group / f"{choice}.yaml"
    if not choice or not path.exists():
        return {}
    root = OmegaConf.create({k: v for k, v in (context or {}).items() if k != group})
    root[group] = OmegaConf.load(path)
    raw = OmegaConf.to_container(root[group], resolve=False)
    return _resolve_or_drop(root, group, raw if isinstance(raw, dict) else {})


def _resolve_or_drop(root: Any, prefix: str, raw: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, dict):
            value = _resolve_or_drop(root, f"{prefix}.{key}", value)
        elif isinstance(value, str) and "${" in value:
            try:
                value = OmegaConf.select(root, f"{prefix}.{key}", throw_on_resolution_failure=True)
            except Exception:  # an interpolation the run's config cannot resolve
                continue
        out[key] = value
    return out


def group_defaults(
    group: str,
    choice: str | None,
    conf_dir: Path | None = None,
    context: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Flattened defaults of ``conf/<group>/<choice>.yaml`` (see :func:`resolved_group`)."""
    return flatten(resolved_group(group, choice, conf_dir, context), group)


def overrides(run: Run) -> dict[str, Any]:
    """Method, verifier and scheduler values that differ from their YAML defaults (the variant).

    The defaults are those of this checkout's ``conf/``: a default changed after the run shows
    up as a variant of the older runs.
    """
    diff = {}
    for group in ("method", "verifier", "scheduler"):
        choice = run.manifest.get(group)
        defaults = group_defaults(group, choice, context=run.config)
        for key, value in flatten(run.config.get(group) or {}, group).items():
            if key in defaults and defaults[key] != value:
                diff[key] = value
    return diff


def variant_string(diff: dict[str, Any], drop: Iterable[str] = ()) -> str:
    """``"retrieval=false, capacity=31"`` style text of an override dict (group prefixes cut)."""
    dropped = set(drop)
    items = [(k.split(".", 1)[1], v) for k, v in diff.items() if k.split(".", 1)[1] not in dropped]
    return ", ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in items)


def run_label(run: Run, drop: Iterable[str] = ()) -> str:
    """Display name: method, non-greedy verifier, non-fixed scheduler, non-default values."""
    name = names.method_name(run.method)
    verifier = run.manifest.get("verifier")
    if verifier and verifier != "greedy":
        name += f" + {verifier.upper() if verifier == 'asd' else verifier}"
    scheduler = run.manifest.get("scheduler")
    if scheduler and scheduler != "fixed":
        name += f" + {scheduler} scheduler"
    variant = variant_string(overrides(run), drop)
    return f"{name} [{variant}]" if variant else name


def hydra_overrides(run: Run) -> list[str]:
    """The command-line/sweep overrides Hydra saved for the run (``.hydra/overrides.yaml``)."""
    path = run.path / ".hydra" / "overrides.yaml"
    if not path.exists():
        return []
    return [str(o) for o in OmegaConf.to_container(OmegaConf.load(path)) or []]


def capacity(run: Run) -> float:
    """The draft-size hyperparameter of the method (its YAML's ``size_key``), NaN without one."""
    key = names.size_key(run.method)
    value = (run.config.get("method") or {}).get(key) if key else None
    return float(value) if isinstance(value, (int, float)) else math.nan


def family(run: Run) -> str:
    """The run's label without its draft size: the runs of a capacity sweep share it."""
    key = names.size_key(run.method)
    return run_label(run, drop=[key] if key else [])


NOT_RECORDED_HARDWARE = "hardware not recorded"
NOT_RECORDED_ENGINE = "engine not recorded"


def hardware_of(manifest: dict[str, Any]) -> tuple[str, str]:
    """``(id, label)`` of the run's hardware fingerprint; records older than the fingerprint
    share the id ``"unknown"`` and the label ``hardware not recorded``."""
    fingerprint = manifest.get("hardware") or {}
    if not isinstance(fingerprint, dict) or not fingerprint.get("id"):
        return "unknown", NOT_RECORDED_HARDWARE
    return str(fingerprint["id"]), str(fingerprint.get("label") or fingerprint["id"])


def engine_of(manifest: dict[str, Any]) -> str:
    """The engine a run's target ran on (``eager`` / ``fast``), or ``engine not recorded``."""
    engine = manifest.get("engine")
    if isinstance(engine, dict):
        engine = engine.get("engine")
    return str(engine) if engine else NOT_RECORDED_ENGINE


def latest_runs(runs: Sequence[Run]) -> list[Run]:
    """Newest run per (label, task): reruns of the same configuration replace older ones."""
    best: dict[tuple[str, str], Run] = {}
    for run in sorted(runs, key=lambda r: (str(r.manifest.get("started")), r.run_id)):
        key = (run_label(run), run.task)
        if key in best:
            log.warning("%s replaces the older run %s of %s on %s",
                        run.run_id, best[key].run_id, *key)  # fmt: skip
        best[key] = run
    return list(best.values())
