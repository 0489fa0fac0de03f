"""The C kernels' shared library: built once from ``csrc/``, cached, loaded and checked.

One library holds every kernel of the fast engine: the small-M GEMMs (``csrc/small_gemm.c``,
:mod:`racer_bench.engine.fast.small_gemm`; AMX tiles in ``csrc/amx_gemm.c``), the row-invariant
attention (``csrc/row_attention.c``, :mod:`racer_bench.engine.fast.row_attention`) and the one-call
Llama layer (``csrc/decoder_layer.c``, :mod:`racer_bench.engine.fast.llama`): one build, one
cache entry, one ABI check.

The library is built with the system C compiler (``$CC``, else ``cc``) into
``$RACER_BENCH_CACHE/kernels`` (default ``~/.cache/racer_bench/kernels``) the first time it is
needed, keyed by a hash of the sources and flags; the build takes about a second. Without a
compiler, on a CPU without AVX2/FMA or on another architecture, :func:`unavailable_reason` says
why and callers fall back to torch's operators. :func:`swapped_library` puts another build in
its place for a while (``scripts/bench_kernel_ab.py``).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from racer_bench.config.paths import cache_dir

CSRC = Path(__file__).parent / "csrc"
SOURCES = tuple(CSRC / name for name in
                ("small_gemm.c", "row_attention.c", "decoder_layer.c", "amx_gemm.c"))  # fmt: skip
HEADERS = (CSRC / "simd.h",)
FLAGS = ("-O3", "-mavx2", "-mfma", "-mf16c", "-fopenmp", "-shared", "-fPIC")
ABI_VERSION = 4
ATTENTION_ABI_VERSION = 1
SCHEDULE_ENV = "RACER_BENCH_GEMM_SCHEDULE"  # OpenMP schedule of the panel loop (the C source)
SCHEDULES = ("static", "dynamic", "guided")


def schedule() -> str:
    """The panel loop's OpenMP schedule: ``$RACER_BENCH_GEMM_SCHEDULE``, default static."""
    name = os.environ.get(SCHEDULE_ENV, SCHEDULES[0])
    if name not in SCHEDULES:
        raise ValueError(f"{SCHEDULE_ENV}={name}: expected one of {', '.join(SCHEDULES)}")
    return name


def build_flags() -> tuple[str, ...]:
    return (*FLAGS, f"-DPANEL_SCHEDULE={schedule()}")


def kernel_dir() -> Path:
    """Where compiled kernels are cached."""
    root = cache_dir()
    return Path(root).expanduser() / "kernels"


@functools.cache
def _load() -> tuple[ctypes.CDLL | None, str | None]:
    """(library, None) or (None, why it is unavailable)."""
    if platform.machine().lower() not in ("x86_64", "amd64") or os.name != "posix":
        return None, f"needs x86-64 Linux (this is {platform.machine()} {os.name})"
    if torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        return None, "needs a CPU with AVX2 and FMA"
    compiler = find_compiler()
    if compiler is None:
        return None, "no C compiler found (set CC or install gcc)"
    flags = build_flags()
    digest = hashlib.sha256(source_digest().encode() + " ".join((compiler, *flags)).encode())
    digest = digest.hexdigest()[:16]
    path = kernel_dir() / f"small_gemm-{digest}.so"
    if not path.exists():
        error = compile_library(compiler, flags, path)
        if error:
            return None, error
    return open_library(path)


def find_compiler() -> str | None:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def open_library(path: Path) -> tuple[ctypes.CDLL | None, str | None]:
    """Load a built library, check its ABI versions and declare every entry point's types:
    (library, None) or (None, why it cannot be used)."""
    lib = ctypes.CDLL(str(path))
    if lib.small_gemm_abi_version() != ABI_VERSION:
        return None, f"{path} has ABI {lib.small_gemm_abi_version()}, expected {ABI_VERSION}"
    if lib.row_attention_abi_version() != ATTENTION_ABI_VERSION:
        return None, f"{path} has attention ABI {lib.row_attention_abi_version()}"
    long, ptr, i32 = ctypes.c_long, ctypes.c_void_p, ctypes.c_int
    lib.small_gemm.argtypes = [ptr, ptr, ptr, long, long, long]
    lib.small_gemm_pack.argtypes = [ptr, ptr, long, long]
    lib.small_gemm_typed.argtypes = [ptr, ptr, ptr, long, long, long, i32]
    lib.small_gemm_pack_typed.argtypes = [ptr, ptr, long, long, i32]
    lib.row_attention.argtypes = [ptr] * 5 + [long] * 9 + [ctypes.c_float, i32]
    lib.small_gemm_pack_pairs.argtypes = [ptr, ptr, long, long]
    lib.small_gemm_bf16_pairs.argtypes = [ptr, ptr, ptr, long, long, long]
    if hasattr(lib, "small_gemm_bf16_amx"):  # builds before the AMX kernel lack it
        lib.small_gemm_bf16_amx.argtypes = [ptr, ptr, ptr, long, long, long]
    lib.decoder_layer.argtypes = [ptr, ptr, long, long, ptr, ptr, ptr, ptr]
    lib.decoder_layer_scratch.argtypes = [ptr, long]
    lib.decoder_layer_scratch.restype = long
    lib.final_norm.argtypes = [ptr, ptr, ptr, long, long, ctypes.c_float, i32, ptr]
    if hasattr(lib, "decoder_stack"):  # builds before it call decoder_layer once per layer
        lib.decoder_stack.argtypes = [ptr, long, ptr, long, long, ptr, ptr, ptr, ptr,
                                      ctypes.c_float, ptr, ptr]  # fmt: skip
    return lib, None


def compile_library(
    compiler: str, flags: tuple[str, ...], path: Path, sources: tuple[Path, ...] = SOURCES
) -> str | None:
    """Build the library at ``path`` (atomically); return an error line or None."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        out = Path(tmp) / path.name
        try:
            done = subprocess.run(
                [compiler, *flags, *map(str, sources), "-o", str(out), "-lm"],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"compiling the kernels failed: {error}"
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["no output"])[0]
            return f"compiling the kernels failed: {first}"
        os.replace(out, path)
    return None


@functools.cache
def source_digest() -> str:
    """A short hash of the kernels' C sources: measurements cached per machine (engine choice,
    cost curves) are keyed by it, so a changed kernel is measured again."""
    blob = b"".join(path.read_bytes() for path in (*SOURCES, *HEADERS))
    return hashlib.sha256(blob).hexdigest()[:8]


def unavailable_reason() -> str | None:
    """None when the kernel can be used here, else one line saying why not."""
    return _load()[1]


_swapped: list[ctypes.CDLL] = []  # a library put in place by `swapped_library` (kernel A/B)


def library() -> ctypes.CDLL:
    if _swapped:
        return _swapped[-1]
    lib, why = _load()
    if lib is None:
        raise RuntimeError(f"small GEMM kernel unavailable: {why}")
    return lib


@contextmanager
def swapped_library(lib: ctypes.CDLL) -> Iterator[None]:
    """Every kernel call inside the block goes to ``lib`` (another build of the same ABI, from
    :func:`open_library`): how a bench times two kernel revisions on one loaded model. Packed
    weights are shared, so both builds must pack alike (the ABI version says so)."""
    _swapped.append(lib)
    try:
        yield
    finally:
        _swapped.pop()
