"""``engine=auto`` and ``model.dtype=auto`` by measurement: the fastest *exact* candidate wins.

A candidate is an (engine, dtype) pair: ``engine=auto`` offers eager and fast, ``dtype=auto``
on a CPU offers float32 and bfloat16 (an explicit value offers only itself). On first use per
machine (hardware fingerprint id), model, request and thread count, each candidate's target
is built, timed (a 1-token AR step and a 16-token tree step) and probed for exactness: on a
random 16-node tree, every node's logits from one tree forward must equal bit for bit the
logits of 1-token AR steps along its path (:func:`probe_exact`). Only an exact candidate can
give outputs equal to AR whatever the draft, so the choice is the fastest exact one (the
fastest of all, with the reason said, when none is exact). Choice, timings and probe results
are cached under ``<cache_dir>/engine_choice/`` and written to every manifest. A GPU target
keeps the eager engine at its requested dtype (the fast engine's kernels are CPU-only).
"""

from __future__ import annotations

import gc
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from racer_bench.engine.fast.kernel_library import source_digest
from racer_bench.engine.schedule import cost
from racer_bench.system import files, hardware

ENGINES = ("eager", "fast")
CPU_DTYPES = ("float32", "bfloat16")
CHOICE_DIR = "engine_choice"
TREE_TOKENS = 16  # a CPU-sized verification forward (root + 15 nodes)
CONTEXT = 128  # tokens in the cache while timing
PROBE_NODES = 16
WARM_S = 1.0  # seconds of untimed forwards before a candidate's timed ones
WARM_ROUNDS = 3  # and at least this many (AR, tree) pairs

Candidate = tuple[str, str]  # (engine, dtype)
Timer = Callable[[Any], dict[str, float]]
Prober = Callable[[Any], bool]
Builder = Callable[[str], Any]  # dtype name -> a fresh target on the eager engine


def engine_timings(
    target: Any, reps: int = 5, tree_tokens: int = TREE_TOKENS, warm_s: float = WARM_S
) -> dict[str, float]:
    """Median seconds of a 1-token (AR) and a ``tree_tokens``-token forward, timed warm.

    A freshly built candidate's first forwards pay for first touches of its weights and the
    thread pool's start (one fast/float32 AR step timed at 212 ms against 20.8 ms warm), so
    each candidate runs pairs of forwards for at least ``warm_s`` seconds and
    :data:`WARM_ROUNDS` rounds before its timed ones; the record keeps what the warm-up took.
    """
    time_forward = cost.target_timer(target, CONTEXT)
    start, rounds = time.perf_counter(), 0
    while rounds < WARM_ROUNDS or time.perf_counter() - start < warm_s:
        time_forward(1), time_forward(tree_tokens)
        rounds += 1
    warm = time.perf_counter() - start
    ar = [time_forward(1) for _ in range(reps)]
    tree = [time_forward(tree_tokens) for _ in range(reps)]
    return {"ar_step_s": statistics.median(ar), "tree_step_s": statistics.median(tree),
            "warmup_s": round(warm, 3), "warmup_rounds": rounds}  # fmt: skip


def probe_exact(target: Any, nodes: int = PROBE_NODES, seed: int = 0) -> bool:
    """Whether every node of a random ``nodes``-node tree gets bit for bit the AR step's logits.

    The tree has up to 4 children per node (a RACER-like bushy top, chains below); the prefix is
    64 random ids. Costs one tree forward and one AR step per node and path position.
    """
    from racer_bench.engine.structs import Draft

    gen = torch.Generator().manual_seed(seed)
    vocab = int(getattr(target, "vocab_size", 256))
    prefix = torch.randint(0, vocab, (65,), generator=gen).tolist()
    parents = [-1] + [int(torch.randint(max(-1, i - 4), i, (1,), generator=gen)) for i in
                      range(1, nodes)]  # fmt: skip
    tokens = torch.randint(0, vocab, (nodes,), generator=gen)
    target.prefill(prefix[:-1])
    tree = target.forward_tree(prefix[-1], Draft(tokens, torch.tensor(parents))).logits
    for node in range(nodes):
        path, at = [], node
        while at >= 0:
            path.append(int(tokens[at]))
            at = parents[at]
        target.prefill(prefix[:-1])
        for token in [prefix[-1], *path[::-1]]:
            past = target.length
            logits = target.forward_tree(token, Draft.chain([])).logits[0]
            target.commit(past, [])
        if not torch.equal(logits, tree[node + 1]):
            return False
    return True


def candidates(engine: str, dtype: str) -> list[Candidate]:
    """The (engine, dtype) pairs a CPU request allows."""
    engines = list(ENGINES) if engine == "auto" else [engine]
    dtypes = list(CPU_DTYPES) if dtype == "auto" else [dtype]
    return [(e, d) for d in dtypes for e in engines]


def pick(records: dict[str, dict[str, Any]]) -> tuple[str, str]:
    """(label of the chosen candidate, why): the fastest exact one (AR + tree step time)."""
    exact = [label for label, r in records.items() if r.get("exact")]
    pool = exact or list(records)
    best = min(pool, key=lambda k: records[k]["ar_step_s"] + records[k]["tree_step_s"])
    parts = "; ".join(
        f"{label}: AR step {r['ar_step_s'] * 1e3:.2f} ms, {TREE_TOKENS}-token tree step "
        f"{r['tree_step_s'] * 1e3:.2f} ms, {'exact' if r.get('exact') else 'not exact'}"
        for label, r in records.items()
    )
    if exact:
        return best, f"auto: measured, {best} is the fastest exact candidate ({parts})"
    return best, f"auto: measured, no candidate is exact, {best} is the fastest ({parts})"


def label(candidate: Candidate) -> str:
    return f"{candidate[0]}/{candidate[1]}"


def build_at(build: Builder, pair: Candidate) -> Any:
    """A fresh target at ``pair``'s dtype, switched to its engine."""
    target = build(pair[1])
    target.set_engine(pair[0])
    return target


def measure(
    build: Builder, pairs: list[Candidate], timer: Timer, prober: Prober
) -> tuple[Any, Candidate, dict[str, dict[str, Any]]]:
    """Time and probe every candidate; returns the chosen target, its pair and the records."""
    records: dict[str, dict[str, Any]] = {}
    best: tuple[Any, Candidate] | None = None
    for pair in pairs:
        target = build_at(build, pair)
        records[label(pair)] = {**timer(target), "exact": bool(prober(target))}
        chosen, _ = pick(records)
        if chosen == label(pair):
            best = (target, pair)
        del target
        gc.collect()
    assert best is not None
    return best[0], best[1], records


def cache_file(cache_dir: Path | str, name: str, request: str) -> Path:
    """``<cache_dir>/engine_choice/<hardware id>-<model>-<request>-t<threads>-k<kernels>.json``
    (kernels: the hash of the fast engine's C sources, so a changed kernel is measured again)."""
    fp = hardware.fingerprint(torch.get_num_threads())
    threads = torch.get_num_threads()
    stem = f"{fp['id']}-{name}-{request}-t{threads}-k{source_digest()}".replace("/", "_")
    return Path(cache_dir).expanduser() / CHOICE_DIR / f"{stem}.json"


def choose(
    build: Builder,
    engine: str,
    dtype: str,
    cache_dir: Path | str,
    name: str,
    device: str = "cpu",
    timer: Timer = engine_timings,
    prober: Prober = probe_exact,
) -> tuple[Any, dict[str, Any]]:
    """The target at the chosen engine and dtype, and the record of the choice.

    Args:
        build: builds a fresh target at a dtype name (eager engine).
        engine, dtype: the request (``auto`` or one value each).
        cache_dir: where choices are cached per machine, model, request and threads.
        name: the model's name (part of the cache key).
        device: ``cpu`` or an accelerator (which keeps the eager engine unmeasured).
        timer, prober: :func:`engine_timings` and :func:`probe_exact` (tests pass fakes).
    """
    if torch.device(device).type != "cpu":
        target = build(dtype)
        target.set_engine("eager")
        why = "auto: not a CPU target, the fast engine's kernels are CPU-only"
        return target, _record(engine, dtype, ("eager", _dtype_of(target)), why)
    pairs = candidates(engine, dtype)
    if len(pairs) == 1:
        why = f"engine={engine} and model.dtype={dtype} were requested"
        return build_at(build, pairs[0]), _record(engine, dtype, pairs[0], why)
    path = cache_file(cache_dir, name, f"{engine}-{dtype}")
    cached = _read(path)
    if cached is not None:
        target = build_at(build, (cached["chosen"], cached["dtype"]))
        return target, {**cached, "cached": True, "cache_file": path.name}
    target, pair, records = measure(build, pairs, timer, prober)
    _, why = pick(records)
    record = {**_record(engine, dtype, pair, why), "candidates": records}
    _write(path, record)
    return target, {**record, "cached": False, "cache_file": path.name}


def _record(engine: str, dtype: str, pair: Candidate, why: str) -> dict[str, Any]:
    return {"requested": engine, "requested_dtype": dtype, "chosen": pair[0], "dtype": pair[1],
            "why": why}  # fmt: skip


def _dtype_of(target: Any) -> str:
    return str(getattr(target, "dtype", "")).removeprefix("torch.")


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if data.get("chosen") in ENGINES and data.get("dtype") else None


def _write(path: Path, record: dict[str, Any]) -> None:
    files.write_text(path, json.dumps(record, indent=2))  # two runs may write at once
