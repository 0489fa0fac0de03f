"""The target's cost profile: cost(N) = time of an N-token verification forward / a 1-token one.

A speculative step forwards the root, the draft nodes and any aux tokens together; the
confidence scheduler (:mod:`racer_bench.engine.schedule.scheduler`) weighs the tokens a tree is
expected
to commit against ``cost(N)``. A profile is

* measured for the loaded target (:func:`measure_cost`): tree-shaped inputs after a cached
  context of ``scheduler.profile_context`` tokens (default :data:`DEFAULT_CONTEXT`), every size
  once per repetition (interleaved), medians over repetitions, sampled on a grid (1, 2, 3, 4, 6,
  8, 12, 16, 24, 32, 48, 64, ...) and interpolated in between;
* cached per (model, dtype, device, threads, torch version, engine, context) under
  ``<cache_dir>/cost_profiles/`` and reused (:func:`resolve_profile` with ``auto``) while a
  spot check at the run's start agrees with it (:func:`still_holds`: a 16-token forward against
  a 1-token one, a fraction of a second); a curve measured in a disturbed sitting once made
  every later run's trees small (2-token forwards at 1.40 AR steps, 16-token at 3.29, where
  the machine alone gives 1.18 and 2.15), and is now measured again;
* or synthetic (tests, model-only comparisons): ``flat`` (every size costs one forward),
  ``steep`` (N tokens cost N forwards), ``linear:<slope>`` (1 + slope * (N - 1));
* or read from a JSON file written by :meth:`CostProfile.save`.

Profiles are made monotone non-decreasing (the least-squares monotone fit of the medians,
scipy's ``isotonic_regression``), so timing noise can never make a bigger tree look cheaper
than a smaller one; unlike a running max, one slow outlier is averaged with its neighbours
instead of raising every larger size.
"""

from __future__ import annotations

import json
import platform
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy.optimize import isotonic_regression

from racer_bench.errors import ConfigError
from racer_bench.system import files

BASE_GRID = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
SYNTHETIC = ("flat", "steep", "linear:<slope>")
PROFILE_DIR = "cost_profiles"
CHECK_SIZE = 16  # the forward the spot check of a cached curve times against a 1-token one
CHECK_REPS = 3
CHECK_TOLERANCE = 1.25  # a cached cost off by more than this factor either way: measure again
# A chat prompt and half of 256 new tokens. Attention over the cache makes big forwards dearer
# as the context grows: SmolLM2-135M on 2 CPU threads, cost(16) = 1.83 after 170 tokens and 2.07
# after 400, cost(64) 4.69 and 5.92; decode steps with 11-16 draft nodes measured 1.6-2.0, so a
# profile taken after a short prefix made the scheduler pick big trees too often.
DEFAULT_CONTEXT = 384


@dataclass
class CostProfile:
    """A monotone cost curve sampled at integer forward sizes, linear in between.

    Attributes:
        sizes: ascending forward sizes (tokens in the forward, root included), starting at 1.
        costs: cost at each size relative to a 1-token forward (``costs[0] == 1``); the values
            given are replaced by their monotone fit, divided by its first entry.
        meta: where the curve comes from (synthetic name, file, or the measurement's key,
            repetitions and raw medians).
    """

    sizes: list[int]
    costs: list[float]
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.sizes) != len(self.costs) or not self.sizes:
            raise ValueError("a cost profile needs one cost per size")
        if self.sizes[0] != 1 or any(
            b <= a for a, b in zip(self.sizes, self.sizes[1:], strict=False)
        ):
            raise ValueError(f"cost profile sizes must ascend from 1, got {self.sizes}")
        costs = np.asarray(self.costs, dtype=float)
        if np.any(np.diff(costs) < 0):  # pooling an already monotone curve again moves its ulps,
            costs = isotonic_regression(costs).x  # so a saved profile loads back bit for bit
        self.costs = (costs / costs[0] if costs[0] != 1.0 else costs).tolist()

    @property
    def max_size(self) -> int:
        return self.sizes[-1]

    def __call__(self, n: int | float) -> float:
        """cost(n); beyond the last size the last segment's slope is extended."""
        return float(self.curve(np.asarray([n], dtype=float))[0])

    def curve(self, n: np.ndarray) -> np.ndarray:
        """cost at every entry of ``n`` (FloatArray[M]); non-decreasing in ``n``."""
        sizes = np.asarray(self.sizes, dtype=float)
        costs = np.asarray(self.costs, dtype=float)
        out = np.interp(n, sizes, costs)
        if len(sizes) > 1:
            slope = (costs[-1] - costs[-2]) / (sizes[-1] - sizes[-2])
            beyond = n > sizes[-1]
            out[beyond] = costs[-1] + slope * (n[beyond] - sizes[-1])
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"sizes": self.sizes, "costs": self.costs, "meta": self.meta}

    def save(self, path: Path | str) -> Path:
        path = Path(path)
        files.write_text(path, json.dumps(self.to_dict(), indent=2))
        return path

    @classmethod
    def load(cls, path: Path | str) -> CostProfile:
        data = json.loads(Path(path).expanduser().read_text(encoding="utf-8"))
        return cls([int(s) for s in data["sizes"]], [float(c) for c in data["costs"]],
                   data.get("meta") or {})  # fmt: skip


def synthetic(spec: str, max_size: int = 64) -> CostProfile:
    """``flat`` | ``steep`` | ``linear:<slope>``: cost(N) = 1 + slope * (N - 1)."""
    slopes = {"flat": 0.0, "steep": 1.0}
    if spec in slopes:
        slope = slopes[spec]
    else:
        match = re.fullmatch(r"linear:([0-9]*\.?[0-9]+)", spec)
        if match is None:
            raise ConfigError(
                f"scheduler.profile={spec}: allowed are auto, {', '.join(SYNTHETIC)} or a "
                "profile file (.json)"
            )
        slope = float(match.group(1))
    sizes = [1, max(2, max_size)]
    return CostProfile(sizes, [1.0, 1.0 + slope * (sizes[1] - 1)], {"source": spec})


def check_spec(spec: str) -> None:
    """Raise ConfigError unless ``spec`` is auto, a synthetic name or a ``.json`` file name."""
    spec = str(spec)
    if spec != "auto" and not spec.endswith(".json") and not Path(spec).expanduser().exists():
        synthetic(spec)


def grid(max_size: int) -> list[int]:
    """Forward sizes to time: :data:`BASE_GRID` up to ``max_size``, doubling beyond 64."""
    sizes = [n for n in BASE_GRID if n < max_size]
    n = BASE_GRID[-1]
    while n * 2 < max_size:
        n *= 2
        if n > sizes[-1]:
            sizes.append(n)
    return sorted({*sizes, max(max_size, 1)})


def tree_shape(n_nodes: int, width: int = 8) -> list[int]:
    """Parents of a RACER-like tree: up to ``width`` children of the root, the rest below them."""
    top = min(width, n_nodes)
    return [-1] * top + [i % top for i in range(n_nodes - top)]


def profile_key(target: Any, context: int = DEFAULT_CONTEXT) -> dict[str, Any]:
    """What a measured profile depends on: model, dtype, device, threads, torch, engine, context."""
    device = torch.device(getattr(target, "device", "cpu"))
    if device.type == "cuda":
        device_name = torch.cuda.get_device_name(device)
    else:
        device_name = f"cpu-{platform.machine()}"
    return {
        "model": str(getattr(target, "name", "model")),
        "dtype": str(getattr(target, "dtype", "")).removeprefix("torch."),
        "device": device_name,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "engine": engine_version(target),
        "context": int(context),
    }


def engine_version(target: Any) -> str:
    """``eager``, or ``fast-<kernel sources hash>`` (a changed kernel is a new engine)."""
    engine = str(getattr(target, "engine", "eager"))
    if engine != "fast":
        return engine
    from racer_bench.engine.fast.kernel_library import source_digest

    return f"fast-{source_digest()}"


def cache_path(cache_dir: Path | str, key: dict[str, Any]) -> Path:
    """``<cache_dir>/cost_profiles/<model>-<dtype>-<device>-t<n>-torch<v>-<engine>-c<context>.json``."""
    context = f"c{key.get('context', DEFAULT_CONTEXT)}"
    parts = [key["model"], key["dtype"], key["device"], f"t{key['threads']}",
             f"torch{key['torch']}", key["engine"], context]  # fmt: skip
    name = "-".join(re.sub(r"[^A-Za-z0-9_.+]+", "_", str(p)) for p in parts)
    return Path(cache_dir).expanduser() / PROFILE_DIR / f"{name}.json"


TimeForward = Callable[[int], float]


def target_timer(target: Any, prefix_len: int = DEFAULT_CONTEXT, seed: int = 0) -> TimeForward:
    """A function timing one verification forward of ``n`` tokens on ``target`` (seconds).

    The target is prefilled once with ``prefix_len`` token ids (content does not change the
    arithmetic); every timed forward is a root plus a :func:`tree_shape` tree, and the cache is
    cut back to the prefix afterwards, so every size sees the same prefix.
    """
    gen = torch.Generator().manual_seed(seed)
    vocab = int(getattr(target, "vocab_size", 256))
    prefix = torch.randint(0, vocab, (prefix_len + 1,), generator=gen).tolist()
    target.prefill(prefix[:-1])
    root = prefix[-1]

    def time_forward(n: int) -> float:
        return time_tree_forward(target, root, random_draft(n - 1, vocab, gen))

    return time_forward


def random_draft(n_nodes: int, vocab: int, gen: torch.Generator) -> Any:
    """A :func:`tree_shape` draft of ``n_nodes`` random token ids (a Draft)."""
    from racer_bench.engine.structs import Draft

    nodes = torch.randint(0, vocab, (n_nodes,), generator=gen)
    return Draft(tokens=nodes, parents=torch.tensor(tree_shape(n_nodes), dtype=torch.long))


def time_tree_forward(target: Any, root: int, draft: Any) -> float:
    """Seconds for one ``forward_tree`` of ``root`` + ``draft``; the cache is rolled back."""
    from racer_bench.engine import kv_cache

    past = target.length
    target.synchronize()
    start = time.perf_counter()
    target.forward_tree(root, draft)
    target.synchronize()
    seconds = time.perf_counter() - start
    kv_cache.drop_last(target.cache, target.length - past)
    return seconds


def measure_cost(
    time_forward: TimeForward,
    sizes: Sequence[int],
    reps: int = 5,
    warmup: int = 1,
    progress: bool = True,
) -> CostProfile:
    """Time every size once per repetition, rotating the order; medians relative to size 1.

    Args:
        time_forward: seconds of one forward of ``n`` tokens (e.g. :func:`target_timer`).
        sizes: forward sizes to time; 1 is added when missing.
        reps: timed repetitions per size (after ``warmup`` untimed ones).
    """
    from tqdm.auto import tqdm

    sizes = sorted({1, *(int(n) for n in sizes)})
    times: dict[int, list[float]] = {n: [] for n in sizes}
    total = (warmup + reps) * len(sizes)
    with tqdm(total=total, desc="cost profile", unit="forward", disable=not progress) as bar:
        for rep in range(warmup + reps):
            shift = rep % len(sizes)
            for n in sizes[shift:] + sizes[:shift]:
                seconds = time_forward(n)
                if rep >= warmup:
                    times[n].append(seconds)
                bar.update()
    medians = [statistics.median(times[n]) for n in sizes]
    raw = [m / medians[0] for m in medians]
    meta = {"reps": reps, "warmup": warmup, "median_seconds": medians, "raw_costs": raw}
    return CostProfile(list(sizes), raw, meta)


def measure_target(
    target: Any,
    max_size: int,
    reps: int = 5,
    prefix_len: int = DEFAULT_CONTEXT,
    progress: bool = True,
) -> CostProfile:
    """:func:`measure_cost` of ``target`` on the :func:`grid` up to ``max_size``, with its key."""
    timer = target_timer(target, prefix_len)
    profile = measure_cost(timer, grid(max_size), reps, progress=progress)
    profile.meta |= {"key": profile_key(target, prefix_len), "prefix_len": prefix_len,
                     "measured": time.strftime("%Y-%m-%dT%H:%M:%S")}  # fmt: skip
    return profile


def still_holds(
    profile: CostProfile, time_forward: TimeForward, reps: int = CHECK_REPS
) -> dict[str, Any]:
    """Whether ``profile``'s cost at :data:`CHECK_SIZE` tokens (or its largest size) still
    holds now: that size and 1 token timed ``reps`` times, interleaved, after one untimed
    round. Returns ``{"size", "cached_cost", "fresh_cost", "held"}``."""
    size = min(CHECK_SIZE, profile.max_size)
    fresh = measure_cost(time_forward, [size], reps, warmup=1, progress=False)(size)
    cached = profile(size)
    held = size == 1 or 1 / CHECK_TOLERANCE <= fresh / cached <= CHECK_TOLERANCE
    return {"size": size, "cached_cost": round(cached, 4), "fresh_cost": round(fresh, 4),
            "held": bool(held)}  # fmt: skip


def resolve_profile(
    spec: str,
    target: Any,
    cache_dir: Path | str,
    max_size: int,
    reps: int = 5,
    progress: bool = True,
    context: int = DEFAULT_CONTEXT,
) -> CostProfile:
    """The profile named by ``scheduler.profile``.

    Args:
        spec: ``auto`` (cached measurement for this target, measured now when missing or too
            short), a synthetic name (:func:`synthetic`) or a profile file.
        target: the loaded target (only ``auto`` uses it).
        cache_dir: ``paths.cache_dir``.
        max_size: the largest forward the run can make (largest draft + root + aux).
        context: cached tokens before the timed forwards (``auto`` only).
    """
    spec = str(spec)
    if spec == "auto":
        key = profile_key(target, context)
        path = cache_path(cache_dir, key)
        stale, wanted = None, max_size
        if path.exists():
            cached = CostProfile.load(path)
            wanted = max(max_size, cached.max_size)  # a small run never shrinks the cache
            if cached.max_size >= max_size:
                check = still_holds(cached, target_timer(target, context))
                cached.meta |= {"source": str(path), "check": check}
                if check["held"]:
                    return cached
                stale = check
        profile = measure_target(target, wanted, reps, context, progress=progress)
        profile.save(path)
        profile.meta["source"] = str(path)
        if stale is not None:
            profile.meta["replaced"] = stale  # the spot check the cached curve failed
        return profile
    if spec.endswith(".json") or Path(spec).expanduser().exists():
        path = Path(spec).expanduser()
        if not path.exists():
            raise ConfigError(f"scheduler.profile={spec}: no such file")
        profile = CostProfile.load(path)
        profile.meta["source"] = str(path)
        return profile
    return synthetic(spec, max_size)
