"""``engine=auto`` by measurement: time an AR step and a tree step on each engine, keep the faster.

On first use on a machine (hardware fingerprint id), model, dtype and thread count, the target
is timed on the eager engine, then switched to the fast engine and timed again (a few seconds);
the choice and the timings are cached under ``<cache_dir>/engine_choice/`` like the cost
profiles, so later runs on the same machine reuse them. A GPU target keeps the eager engine
(the fast engine's kernels are CPU-only). The fast engine cannot be undone on a target, so when
eager wins the target is rebuilt.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from racer_bench import hardware
from racer_bench.engine import cost as C

ENGINES = ("eager", "fast")
CHOICE_DIR = "engine_choice"
TREE_TOKENS = 16  # a CPU-sized verification forward (root + 15 nodes)
CONTEXT = 128  # tokens in the cache while timing

Timer = Callable[[Any], dict[str, float]]


def engine_timings(target: Any, reps: int = 5, tree_tokens: int = TREE_TOKENS) -> dict[str, float]:
    """Median seconds of a 1-token (AR) and a ``tree_tokens``-token forward, after warm-up."""
    time_forward = C.target_timer(target, CONTEXT)
    for _ in range(2):
        time_forward(1), time_forward(tree_tokens)
    ar = [time_forward(1) for _ in range(reps)]
    tree = [time_forward(tree_tokens) for _ in range(reps)]
    return {"ar_step_s": statistics.median(ar), "tree_step_s": statistics.median(tree)}


def pick(timings: dict[str, dict[str, float]]) -> str:
    """The engine with the least AR step + tree step time (a decode loop does both)."""
    return min(timings, key=lambda e: timings[e]["ar_step_s"] + timings[e]["tree_step_s"])


def cache_file(cache_dir: Path | str, target: Any) -> Path:
    """``<cache_dir>/engine_choice/<hardware id>-<model>-<dtype>-t<threads>.json``."""
    fp = hardware.fingerprint(torch.get_num_threads())
    dtype = str(getattr(target, "dtype", "")).removeprefix("torch.")
    name = f"{fp['id']}-{getattr(target, 'name', 'model')}-{dtype}-t{torch.get_num_threads()}"
    return Path(cache_dir).expanduser() / CHOICE_DIR / f"{name.replace('/', '_')}.json"


def describe(chosen: str, timings: dict[str, dict[str, float]]) -> str:
    parts = [
        f"{e} AR step {t['ar_step_s'] * 1e3:.2f} ms, {TREE_TOKENS}-token tree step "
        f"{t['tree_step_s'] * 1e3:.2f} ms"
        for e, t in timings.items()
    ]
    return f"auto: measured, {chosen} is faster ({'; '.join(parts)})"


def measure(target: Any, rebuild: Callable[[], Any], timer: Timer) -> tuple[Any, str, dict]:
    """Time both engines; returns the target on the faster one, its name and the timings."""
    timings = {"eager": timer(target)}
    target.set_engine("fast")
    timings["fast"] = timer(target)
    chosen = pick(timings)
    if chosen == "eager":
        target = rebuild()
        target.set_engine("eager")
    return target, chosen, timings


def choose_auto(
    target: Any,
    cache_dir: Path | str,
    rebuild: Callable[[], Any],
    timer: Timer = engine_timings,
) -> tuple[Any, dict[str, Any]]:
    """``engine=auto``: the target on the faster engine and the record of the choice.

    Args:
        target: a freshly built target (eager engine).
        cache_dir: where the choice is cached per machine, model, dtype and threads.
        rebuild: builds a fresh target (needed when eager wins after fast was timed).
        timer: seconds of an AR step and a tree step on a target (:func:`engine_timings`).
    """
    if torch.device(getattr(target, "device", "cpu")).type != "cpu":
        target.set_engine("eager")
        why = "auto: not a CPU target, the fast engine's kernels are CPU-only"
        return target, {"requested": "auto", "chosen": "eager", "why": why}
    path = cache_file(cache_dir, target)
    cached = _read(path)
    if cached is not None:
        target.set_engine(cached["chosen"])
        return target, {**cached, "cached": True, "cache_file": path.name}
    target, chosen, timings = measure(target, rebuild, timer)
    record = {"requested": "auto", "chosen": chosen, "why": describe(chosen, timings),
              "timings": timings}  # fmt: skip
    _write(path, record)
    return target, {**record, "cached": False, "cache_file": path.name}


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if data.get("chosen") in ENGINES else None


def _write(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # two runs may write at once
    tmp.write_text(json.dumps(record, indent=2), encoding="utf-8")
    tmp.replace(path)
