"""``resume=<run folder>``: continue a run with the configuration it was started with.

A run folder must never mix configurations. ``resume=R`` alone loads R's saved configuration
(the resolved config in its manifest, so hardware-derived defaults such as a CPU-sized draft
capacity stay what they were) and continues it. Overrides given beside ``resume=`` are checked
against that configuration: one that would change what the run measures is refused with one
line naming the keys. Everything is refused except the keys in :data:`SAFE_KEYS`, which only
change how the run is carried out; those are applied and recorded in the manifest as a resume
event. Refusing by default means a key added later (``engine``, a ``scheduler`` group) is
protected without anyone listing it here.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from racer_bench.config.legacy import retarget
from racer_bench.config.paths import CONF_DIR, REPO_ROOT
from racer_bench.engine.schedule.settings import upgrade
from racer_bench.errors import ConfigError
from racer_bench.record import folder as records
from racer_bench.run.resolvers import device_kind

SAFE_KEYS = (
    "resume",
    "num_threads",
    "adapt_threads",
    "warmup_prompts",
    "logger",
    "tags",
    "experiment_name",
)


@dataclass
class Resumed:
    """A run folder's saved configuration, ready to continue."""

    cfg: DictConfig
    choices: dict[str, str]
    changed: dict[str, Any] = field(default_factory=dict)  # safe overrides that differ


def is_finished(run_dir: Path) -> bool:
    """A run that wrote its summary and is not marked INCOMPLETE."""
    return (run_dir / records.SUMMARY_FILE).exists() and not (
        run_dir / records.INCOMPLETE_FILE
    ).exists()


def restore(
    cfg: DictConfig, overrides: Sequence[str] = (), chosen: dict[str, str] | None = None
) -> Resumed:
    """The configuration saved in ``cfg.resume``'s manifest, with the safe ``overrides`` applied.

    Args:
        cfg: the config composed for this invocation (its ``resume`` names the run folder).
        overrides: the command-line overrides of this invocation (Hydra syntax).
        chosen: this invocation's group choices (``{"method": "pld", ...}``), when known.
    """
    run_dir = Path(str(cfg.resume))
    if not (run_dir / records.MANIFEST_FILE).exists():
        raise ConfigError(f"resume={run_dir}: not a run folder (no {records.MANIFEST_FILE})")
    manifest = records.read_json(run_dir / records.MANIFEST_FILE)
    saved = OmegaConf.create(retarget(manifest["config"]))
    upgrade(saved)
    pin_measured_choices(saved, manifest)
    choices = dict(manifest.get("choices") or {})
    for group in ("model", "method", "verifier", "task"):
        choices.setdefault(group, manifest.get(group))
    refused, safe = [], []
    keys = override_keys(overrides)
    for key, is_group in keys:
        besides = [k for k, _ in keys if k.startswith(f"{key}.")]  # judged on their own
        if key == "resume" or not differs(cfg, saved, key, is_group, besides, choices, chosen):
            continue
        (safe if key.split(".")[0] in SAFE_KEYS else refused).append(key)
    if refused:
        raise ConfigError(
            f"resume={run_dir}: cannot change {', '.join(dict.fromkeys(refused))} of a saved run "
            "(a run folder never mixes configurations); start a new run to change them"
        )
    check_hardware(saved, manifest, run_dir)
    changed = {}
    for key in safe:
        value = OmegaConf.select(cfg, key)
        OmegaConf.update(saved, key, value, merge=False)
        changed[key] = _plain(cfg, key)
    saved.resume = str(run_dir)
    return Resumed(saved, {k: v for k, v in choices.items() if v is not None}, changed)


def pin_measured_choices(saved: DictConfig, manifest: dict[str, Any]) -> None:
    """Replace ``engine=auto`` and ``model.dtype=auto`` by what the run measured and ran.

    ``auto`` is decided per machine and may decide otherwise today (a newer engine, another
    cache): a continued or re-measured run must keep the engine and dtype of its records.
    """
    choice = manifest.get("engine_choice") or {}
    if saved.get("engine", "auto") == "auto" and choice.get("chosen"):
        OmegaConf.update(saved, "engine", choice["chosen"], merge=False, force_add=True)
    dtype = manifest.get("dtype")
    if "model" in saved and saved.model.get("dtype") == "auto" and dtype:
        saved.model.dtype = dtype


def override_keys(overrides: Sequence[str]) -> list[tuple[str, bool]]:
    """(key, names a config group) for each override, Hydra's own ``hydra.*`` ones left out."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    keys = []
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        key = override.key_or_group
        if key.split(".")[0] == "hydra":
            continue
        keys.append((key, "." not in key and (CONF_DIR / key).is_dir()))
    return keys


def differs(
    cfg: DictConfig,
    saved: DictConfig,
    key: str,
    is_group: bool,
    besides: Sequence[str],
    saved_choices: dict[str, str],
    chosen: dict[str, str] | None,
) -> bool:
    """Whether ``cfg`` (this invocation) and ``saved`` (the run's config) disagree on ``key``.

    A group override (``method=pld``) is compared by the option's name when both sides know
    it, else by the content of the composed group without the keys ``besides`` (overridden
    too, so judged on their own: ``method=racer method.capacity=3`` changes only the capacity).
    """
    if is_group and saved_choices.get(key) is not None and (chosen or {}).get(key) is not None:
        return str(chosen[key]) != str(saved_choices[key])  # type: ignore[index]
    ours, theirs = _plain(cfg, key), _plain(saved, key)
    for sub in besides:
        _drop(ours, sub[len(key) + 1 :])
        _drop(theirs, sub[len(key) + 1 :])
    return ours != theirs


def _plain(cfg: DictConfig, key: str) -> Any:
    value = OmegaConf.select(cfg, key, default="<absent>")
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def _drop(tree: Any, dotted: str) -> None:
    """Remove ``dotted`` (``a.b``) from nested dicts, if there."""
    *parents, leaf = dotted.split(".")
    for part in parents:
        tree = tree.get(part) if isinstance(tree, dict) else None
    if isinstance(tree, dict):
        tree.pop(leaf, None)


def differing_keys(saved: Any, now: Any, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two plain configs, the safe keys left out."""
    if not (isinstance(saved, dict) and isinstance(now, dict)):
        return [] if saved == now else [prefix.rstrip(".")]
    keys = [k for k in dict.fromkeys([*saved, *now]) if not (not prefix and k in SAFE_KEYS)]
    missing = object()
    return [d for k in keys for d in differing_keys(saved.get(k, missing), now.get(k, missing),
                                                     f"{prefix}{k}.")]  # fmt: skip


def check_hardware(saved: DictConfig, manifest: dict[str, Any], run_dir: Path) -> None:
    """Refuse to continue a run measured on a CPU on a GPU here, or the reverse."""
    measured = manifest.get("device")
    if not measured or "model" not in saved or "device" not in saved.model:
        return
    then = "cpu" if str(measured).startswith("cpu") else "gpu"
    now = device_kind(str(saved.model.device))
    if then != now:
        raise ConfigError(
            f"resume={run_dir}: the run was measured on {then} ({measured}) but "
            f"model.device={saved.model.device} means {now} here; resume it on a {then} machine"
        )


def record_event(run_dir: Path, changed: dict[str, Any], device: str, done: int) -> None:
    """Append a resume event (time, changed safe keys, device, prompts done) to the manifest."""
    path = run_dir / records.MANIFEST_FILE
    manifest = records.read_json(path)
    sha = records.git_state(REPO_ROOT)["git_sha"]
    event = {"at": time.strftime("%Y-%m-%dT%H:%M:%S"), "changed": changed, "device": device,
             "prompts_done": done, "git_sha": sha}  # fmt: skip
    manifest.setdefault("resumes", []).append(event)
    records.write_json(path, manifest)
