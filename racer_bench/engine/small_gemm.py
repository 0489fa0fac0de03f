"""Small-M GEMM for CPU verification forwards: ``csrc/small_gemm.c``, compiled once, via ctypes.

The same library holds the row-invariant attention kernel (``csrc/row_attention.c``,
:mod:`racer_bench.engine.row_attention`) and the one-call Llama layer (``csrc/decoder_layer.c``,
:mod:`racer_bench.engine.native_llama`): one build, one cache entry, one ABI check.

Why a kernel of our own: on the 2-core AVX2 reference machine, MKL's sgemm behind
``F.linear`` runs 2-16-row products (the shape of a speculative step) at a third of the
core's peak, and oneDNN's or MKL's packed paths do not do better (docs/benchmarks.md has the
numbers). The kernel streams each weight once per forward and reuses it across up to 6 rows
in registers (8 in the AVX512-BF16 kernel), prefetching the next weights while it reuses the
current ones for further rows, so forwards of up to ~8 tokens cost about what the weights'
memory traffic costs, and it is batch-invariant (a row's output does not depend on the other rows).

The library is built with the system C compiler (``$CC``, else ``cc``) into
``$RACER_BENCH_CACHE/kernels`` (default ``~/.cache/racer_bench/kernels``) the first time it is
needed, keyed by a hash of the source and flags; the build takes about a second. Without a
compiler, on a CPU without AVX2/FMA or on another architecture, :func:`unavailable_reason` says
why and callers fall back to ``F.linear``.
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
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function

from racer_bench.config.paths import cache_dir

SOURCE = Path(__file__).parent / "csrc" / "small_gemm.c"
SOURCES = (SOURCE, SOURCE.with_name("row_attention.c"), SOURCE.with_name("decoder_layer.c"))
HEADERS = (SOURCE.with_name("simd.h"),)
FLAGS = ("-O3", "-mavx2", "-mfma", "-mf16c", "-fopenmp", "-shared", "-fPIC")
PANEL = 16  # output columns per packed panel (NR in the C source)
ABI_VERSION = 4
ATTENTION_ABI_VERSION = 1
# weight / KV element types the kernels read (the C enums)
TYPE_CODES = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}
MAX_ROWS = 128  # more rows (a prefill) take F.linear: MKL's large-M GEMM is built for them
SCHEDULE_ENV = "RACER_BENCH_GEMM_SCHEDULE"  # OpenMP schedule of the panel loop (the C source)
SCHEDULES = ("static", "dynamic", "guided")
BF16_ENV = "RACER_BENCH_BF16_GEMM"  # force the bfloat16 kernel: pairs | widen
BF16_KERNELS = ("pairs", "widen")


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
        error = _compile(compiler, flags, path)
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
    lib.decoder_layer.argtypes = [ptr, ptr, long, long, ptr, ptr, ptr, ptr]
    lib.decoder_layer_scratch.argtypes = [ptr, long]
    lib.decoder_layer_scratch.restype = long
    lib.final_norm.argtypes = [ptr, ptr, ptr, long, long, ctypes.c_float, i32, ptr]
    return lib, None


def _compile(
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
            return f"compiling {SOURCE.name} failed: {error}"
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["no output"])[0]
            return f"compiling {SOURCE.name} failed: {first}"
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


def bf16_kernel() -> str:
    """The bfloat16 GEMM: ``pairs`` (AVX512-BF16 dot products) where the CPU has them, else
    ``widen`` (bfloat16 widened to float32 FMAs); ``$RACER_BENCH_BF16_GEMM`` forces one."""
    forced = os.environ.get(BF16_ENV)
    if forced is not None:
        if forced not in BF16_KERNELS:
            raise ValueError(f"{BF16_ENV}={forced}: expected one of {', '.join(BF16_KERNELS)}")
        return forced
    return "pairs" if library().small_gemm_has_avx512bf16() else "widen"


def uses_pairs(weight: torch.Tensor) -> bool:
    """Whether a weight [N, K] goes through the AVX512-BF16 kernel (bfloat16, K even)."""
    return weight.dtype == torch.bfloat16 and weight.shape[1] % 2 == 0 and bf16_kernel() == "pairs"


def pack_pairs(weight: torch.Tensor) -> torch.Tensor:
    """Pack BFloat16Tensor[N, K] (K even) in pairs of k for :func:`matmul_pairs`."""
    n, k = weight.shape
    w = weight.detach().contiguous()
    packed = torch.empty(((n + PANEL - 1) // PANEL) * k * PANEL, dtype=torch.bfloat16)
    library().small_gemm_pack_pairs(w.data_ptr(), packed.data_ptr(), n, k)
    return packed


def matmul_pairs(x: torch.Tensor, packed: torch.Tensor, n: int) -> torch.Tensor:
    """``x @ W.T`` for x BFloat16Tensor[M, K] and W packed by :func:`pack_pairs`: float32 [M, N]."""
    x = x.contiguous()
    m, k = x.shape
    y = torch.empty(m, n, dtype=torch.float32)
    if m:
        library().small_gemm_bf16_pairs(x.data_ptr(), packed.data_ptr(), y.data_ptr(), m, n, k)
    return y


def pack(weight: torch.Tensor) -> torch.Tensor:
    """Pack Tensor[N, K] (float32, bfloat16 or float16, CPU) into panels of the same dtype,
    Tensor[ceil(N/16) * K * 16]."""
    n, k = weight.shape
    w = weight.detach().contiguous()
    packed = torch.empty(((n + PANEL - 1) // PANEL) * k * PANEL, dtype=w.dtype)
    library().small_gemm_pack_typed(w.data_ptr(), packed.data_ptr(), n, k, TYPE_CODES[w.dtype])
    return packed


def matmul(x: torch.Tensor, packed: torch.Tensor, n: int) -> torch.Tensor:
    """``x @ W.T`` for x FloatTensor[M, K] (float32, CPU) and W packed by :func:`pack`.

    Returns FloatTensor[M, N] in float32 whatever the weight type (the accumulation type).
    """
    x = x.contiguous()
    m, k = x.shape
    y = torch.empty(m, n, dtype=torch.float32)
    if m:
        code = TYPE_CODES[packed.dtype]
        library().small_gemm_typed(x.data_ptr(), packed.data_ptr(), y.data_ptr(), m, n, k, code)
    return y


class PackedWeight:
    """A weight [N, K] packed for the kernel that suits its dtype (bf16 pairs, else widening)."""

    def __init__(self, weight: torch.Tensor) -> None:
        self.n, self.k = weight.shape
        self.pairs = uses_pairs(weight)
        self.packed = pack_pairs(weight) if self.pairs else pack(weight)

    def __call__(self, rows: torch.Tensor) -> torch.Tensor:
        """``rows @ W.T`` for rows [M, K] in the weight's dtype -> float32 [M, N]."""
        profiling = torch.autograd._profiler_enabled()  # ctypes calls are invisible to it
        with record_function("racer_bench::small_gemm") if profiling else nullcontext():
            if self.pairs:
                return matmul_pairs(rows, self.packed, self.n)
            return matmul(rows.float(), self.packed, self.n)


def takes_kernel(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether ``x @ weight.T`` goes through the kernel (else ``F.linear``): same dtype, CPU, at
    most :data:`MAX_ROWS` rows, no gradients."""
    return (
        x.dtype == weight.dtype
        and x.device.type == "cpu"
        and x.numel() <= MAX_ROWS * x.shape[-1]
        and not (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad))
    )


class PackedLinear(nn.Module):
    """A drop-in for an ``nn.Linear`` (same ``weight``/``bias`` parameters) using the kernel.

    Inputs of more than :data:`MAX_ROWS` rows (prefills), of another dtype than the weight, not
    on the CPU, or that need gradients, take ``F.linear``. Half-precision inputs are widened to
    float32, multiplied with float32 accumulation and rounded back once (as ``F.linear`` does,
    though not in the same order). The weight is packed at construction: the target's weights
    must not change afterwards.
    """

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        self._packed = PackedWeight(linear.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """FloatTensor[..., in_features] -> FloatTensor[..., out_features]."""
        if not takes_kernel(x, self.weight):
            return F.linear(x, self.weight, self.bias)
        y = self._packed(x.reshape(-1, self.in_features))
        if self.bias is not None:
            y += self.bias
        return y.view(*x.shape[:-1], self.out_features).to(x.dtype)

    def extra_repr(self) -> str:
        pairs = self._packed.pairs
        kernel = "bf16 pairs" if pairs else str(self.weight.dtype).removeprefix("torch.")
        return f"in_features={self.in_features}, out_features={self.out_features}, {kernel}"


def pack_linears(module: nn.Module) -> int:
    """Replace every CPU ``nn.Linear`` (float32, bfloat16, float16) below ``module`` by a
    :class:`PackedLinear`.

    Tied weights stay tied (the new module holds the same Parameter). Returns how many were
    replaced.
    """
    replaced = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if (
                isinstance(child, nn.Linear)
                and child.weight.dtype in TYPE_CODES
                and child.weight.device.type == "cpu"
            ):
                setattr(parent, name, PackedLinear(child))
                replaced += 1
    return replaced
