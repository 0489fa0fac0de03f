"""Where a fast-engine step's time goes, phase by phase inside the layer stack
(``scripts/profile_layer_phases.py``).

The kernels are built once more with ``-DLAYER_PHASES``: every ``decoder_layer`` call then adds
the time stamp counter's ticks of its phases (norms, each GEMM, rotary and KV write, row
attention, the SiLU gate, residuals) to a table in the library. That build is swapped into a
loaded fast-engine target, whole tree-shaped forwards run after prefixes of several lengths,
and the ticks become microseconds per layer through the counter's rate, measured against
``time.perf_counter`` over the same forwards. What the step spends outside the layers (LM head,
embedding, rotary tables, Python) is the step's wall time minus the layers'.

Why: the share of row attention grows with the context and with the tokens in a step, while
the GEMMs' share does not; which part to make faster depends on both, and on the machine.
"""

from __future__ import annotations

import ctypes
import tempfile
import time
from pathlib import Path

from racer_bench.bench.bench_forward_cost import draft_of
from racer_bench.engine.fast import kernel_library
from racer_bench.engine.schedule.cost import time_tree_forward
from racer_bench.engine.target import HFTarget

# decoder_layer.c's PHASE(i) marks, in order
PHASES = (
    "input norm", "q/k/v GEMM", "rotary + KV write", "row attention", "o GEMM",
    "residual + post norm", "gate/up GEMM", "SiLU gate", "down GEMM", "residual",
)  # fmt: skip
OUTSIDE = "outside the layers"  # LM head, embedding, rotary tables, the loop's Python

Shares = dict[str, float]  # phase -> microseconds per step


def build_phase_library(out_dir: Path) -> ctypes.CDLL:
    """The kernels of this tree compiled with the phase counters into ``out_dir``."""
    compiler = kernel_library.find_compiler()
    if compiler is None:
        raise SystemExit("no C compiler found (set CC or install gcc)")
    path = out_dir / "small_gemm-phases.so"
    flags = (*kernel_library.build_flags(), "-DLAYER_PHASES")
    error = kernel_library.compile_library(compiler, flags, path)
    if error:
        raise SystemExit(error)
    lib, why = kernel_library.open_library(path)
    if lib is None:
        raise SystemExit(why)
    lib.layer_phases.restype = ctypes.POINTER(ctypes.c_ulonglong)
    lib.layer_phase_clock.restype = ctypes.c_ulonglong
    return lib


def profile_step(
    lib: ctypes.CDLL, target: HFTarget, root: int, tokens: int, reps: int, warmup: int = 3
) -> Shares:
    """Microseconds per step in each phase (summed over the layers) and outside the layers, the
    mean of ``reps`` tree-shaped forwards of ``tokens`` tokens after the target's prefix."""
    draft = draft_of("tree", tokens, root)
    with kernel_library.swapped_library(lib):
        for _ in range(warmup):
            time_tree_forward(target, root, draft)
        ticks = lib.layer_phases()
        for phase in range(len(PHASES)):
            ticks[phase] = 0
        clock_start, start = lib.layer_phase_clock(), time.perf_counter()
        wall = sum(time_tree_forward(target, root, draft) for _ in range(reps))
        rate = (lib.layer_phase_clock() - clock_start) / (time.perf_counter() - start)
        per_step = {name: ticks[i] / rate / reps * 1e6 for i, name in enumerate(PHASES)}
    per_step[OUTSIDE] = wall / reps * 1e6 - sum(per_step.values())
    return per_step


def profile(
    target: HFTarget,
    prefixes: dict[int, list[int]],
    sizes: list[int],
    reps: int,
) -> dict[tuple[int, int], Shares]:
    """Per (context length, tokens in the step): :func:`profile_step` after that prefix."""
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        lib = build_phase_library(Path(tmp))
        for context, prefix in prefixes.items():
            target.prefill(prefix[:-1])
            for tokens in sizes:
                results[context, tokens] = profile_step(lib, target, prefix[-1], tokens, reps)
    return results


def table(results: dict[tuple[int, int], Shares]) -> str:
    """Markdown: rows are phases, columns (context, tokens): microseconds per step and share."""
    keys = sorted(results)
    totals = {key: sum(results[key].values()) for key in keys}
    header = ["phase", *[f"{c} ctx, {n} tok: µs (share)" for c, n in keys]]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * len(keys)]
    for phase in (*PHASES, OUTSIDE):
        cells = [f"{results[key][phase]:.0f} ({results[key][phase] / totals[key]:.0%})"
                 for key in keys]  # fmt: skip
        lines.append(f"| {phase} | " + " | ".join(cells) + " |")
    lines.append("| **step** | " + " | ".join(f"{totals[k] / 1e3:.2f} ms" for k in keys) + " |")
    return "\n".join(lines)
