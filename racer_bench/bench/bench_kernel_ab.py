"""Two or more builds of the C kernels on one loaded model (``scripts/bench_kernel_ab.py``):
each build compiled from a git revision (or the working tree), swapped in turn into the same
fast-engine target, whole forwards timed interleaved, and the logits of random trees compared
bit for bit between builds.

Why a model-level A/B: a kernel change shows its worth only in the whole step (a GEMM that
wins alone can lose to the memory traffic around it), the machine's speed drifts by 10-30%
between runs, and a change meant to be speed-only must leave every bit of every logit as it
was, which this checks on the real weights at the same time.
"""

from __future__ import annotations

import ctypes
import statistics
import subprocess
import tempfile
from pathlib import Path

import torch

from racer_bench.bench.bench_forward_cost import draft_of
from racer_bench.config.paths import REPO_ROOT
from racer_bench.engine import kv_cache
from racer_bench.engine.fast import kernel_library
from racer_bench.engine.schedule.cost import random_draft, time_tree_forward
from racer_bench.engine.target import HFTarget

WORKTREE = "worktree"
OLD_CSRC = ("racer_bench/engine/csrc",)  # where older revisions keep the C sources
Medians = dict[tuple[str, str, int], float]  # (dtype, build, tokens in forward) -> seconds


def build(label: str, out_dir: Path) -> ctypes.CDLL:
    """Compile the kernels of ``label`` (a git revision, or ``worktree``) into ``out_dir``: every
    C source and header of ``csrc/`` as it is there (older revisions have fewer files)."""
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in kernel_sources(label).items():
            (Path(tmp) / name).write_bytes(text)
        compiler = kernel_library.find_compiler()
        if compiler is None:
            raise SystemExit("no C compiler found (set CC or install gcc)")
        out = out_dir / f"kernels-{label.replace('/', '_')}.so"
        c_files = tuple(sorted(Path(tmp).glob("*.c")))
        error = kernel_library.compile_library(compiler, kernel_library.build_flags(), out, c_files)
    if error:
        raise SystemExit(f"build {label}: {error}")
    lib, why = kernel_library.open_library(out)
    if lib is None:
        raise SystemExit(f"build {label}: {why} (its weights pack differently; no A/B)")
    if not hasattr(lib, "small_gemm_bf16_amx"):
        # a build from before the AMX kernel runs the pairs kernel wherever AMX is asked for,
        # as its decoder layer does with any non-zero kernel code
        lib.small_gemm_bf16_amx = lib.small_gemm_bf16_pairs
    return lib


def kernel_sources(label: str) -> dict[str, bytes]:
    """File name -> content of the ``.c`` and ``.h`` files of ``csrc/`` at ``label``."""
    if label == WORKTREE:
        return {p.name: p.read_bytes() for p in sorted(kernel_library.CSRC.iterdir())
                if p.suffix in (".c", ".h")}  # fmt: skip
    today = kernel_library.CSRC.relative_to(REPO_ROOT).as_posix()
    for folder in (today, *OLD_CSRC):  # revisions from before the fast engine's own package
        listing = git("ls-tree", "--name-only", label, f"{folder}/")
        names = [Path(line).name for line in (listing or b"").decode().split()]
        if names:
            break
    else:
        raise SystemExit(f"--builds {label}: git cannot show its kernels ({today})")
    files = {name: git("show", f"{label}:{folder}/{name}") for name in names
             if name.endswith((".c", ".h"))}  # fmt: skip
    missing = [name for name, text in files.items() if text is None]
    if missing:
        raise SystemExit(f"--builds {label}: git cannot show {folder}/{missing[0]} there")
    return files


def resolve(label: str) -> str:
    """A build's name in tables and records: ``worktree``, or the revision's short sha (a name
    like ``HEAD`` means another commit tomorrow)."""
    if label == WORKTREE:
        return label
    sha = git("rev-parse", "--short", f"{label}^{{commit}}")
    if sha is None:
        raise SystemExit(f"--builds {label}: not a git revision here")
    return sha.decode().strip()


def git(*args: str) -> bytes | None:
    """``git args`` in the repository: its output, or None when git fails."""
    done = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True)
    return done.stdout if done.returncode == 0 else None


def measure(
    targets: dict[str, tuple[HFTarget, int]],
    libs: dict[str, ctypes.CDLL],
    sizes: list[int],
    reps: int,
) -> Medians:
    """Median seconds of a tree-shaped forward per (dtype, build, size); every repetition walks
    sizes, dtypes and builds in turn; two warm-up repetitions are dropped."""
    times: dict[tuple[str, str, int], list[float]] = {}
    for rep in range(reps + 2):
        for n in sizes:
            for dtype, (target, root) in targets.items():
                for label, lib in libs.items():
                    with kernel_library.swapped_library(lib):
                        seconds = time_tree_forward(target, root, draft_of("tree", n, root))
                    if rep >= 2:
                        times.setdefault((dtype, label, n), []).append(seconds)
    return {key: statistics.median(values) for key, values in times.items()}


def logits_agree(
    target: HFTarget, root: int, libs: dict[str, ctypes.CDLL], sizes: list[int], seed: int = 0
) -> dict[int, bool]:
    """Per size: whether every build gives the first build's logits bit for bit on a random
    tree of that many tokens (root included)."""
    gen = torch.Generator().manual_seed(seed)
    vocab = int(target.model.config.vocab_size)
    agree = {}
    for n in sizes:
        draft = random_draft(n - 1, vocab, gen)
        outputs = []
        for lib in libs.values():
            with kernel_library.swapped_library(lib):
                past = target.length
                outputs.append(target.forward_tree(root, draft).logits.clone())
                kv_cache.drop_last(target.cache, target.length - past)
        agree[n] = all(torch.equal(outputs[0], other) for other in outputs[1:])
    return agree


def table(medians: Medians, agree: dict[str, dict[int, bool]], labels: list[str]) -> str:
    """Markdown: per dtype and size, each build's ms, its ratio to the first, bits equal."""
    base = labels[0]
    header = ["dtype", "tokens in forward", *[f"{label} ms" for label in labels]]
    header += [f"{label} / {base}" for label in labels[1:]] + ["logits identical"]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 2) + "---|"]
    for dtype, sizes in agree.items():
        for n, same in sizes.items():
            ms = [medians[(dtype, label, n)] * 1e3 for label in labels]
            cells = [dtype, str(n), *[f"{m:.2f}" for m in ms]]
            cells += [f"{m / ms[0]:.3f}" for m in ms[1:]] + ["yes" if same else "**no**"]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
