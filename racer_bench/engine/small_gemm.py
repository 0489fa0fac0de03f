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
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function

from racer_bench.config.paths import cache_dir
from racer_bench.system import hardware

SOURCE = Path(__file__).parent / "csrc" / "small_gemm.c"
SOURCES = (
    SOURCE, SOURCE.with_name("row_attention.c"), SOURCE.with_name("decoder_layer.c"),
    SOURCE.with_name("amx_gemm.c"),
)  # fmt: skip
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
BF16_ENV = "RACER_BENCH_BF16_GEMM"  # force the bfloat16 kernel: amx | pairs | widen
BF16_KERNELS = ("amx", "pairs", "widen")
KERNEL_CODES = {None: 0, "pairs": 1, "amx": 2}  # PackedWeight.kernel -> decoder_layer's `pairs`
AMX_K = 32  # the AMX kernel needs K a multiple of this (16 pairs per tile row)


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
    if not hasattr(lib, "small_gemm_has_amx"):
        # a build from before the AMX kernel (a kernel A/B): it runs the pairs kernel wherever
        # AMX is asked for, as its decoder layer does with any non-zero kernel code
        lib.small_gemm_bf16_amx = lib.small_gemm_bf16_pairs
    lib.small_gemm_bf16_amx.argtypes = [ptr, ptr, ptr, long, long, long]
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
    """The bfloat16 GEMM: ``amx`` (AMX tiles) where the CPU has them and they pass
    :func:`amx_unusable`'s check, else ``pairs`` (AVX512-BF16 dot products) where the CPU has
    them, else ``widen`` (bfloat16 widened to float32 FMAs); ``$RACER_BENCH_BF16_GEMM`` forces one
    the CPU can run."""
    forced = os.environ.get(BF16_ENV)
    if forced is not None:
        if forced not in BF16_KERNELS:
            raise ValueError(f"{BF16_ENV}={forced}: expected one of {', '.join(BF16_KERNELS)}")
        why = unable(forced)
        if why:
            raise ValueError(f"{BF16_ENV}={forced}: {why}")
        return forced
    return next(name for name in BF16_KERNELS if unable(name) is None)


def unable(kernel: str) -> str | None:
    """Why this CPU cannot run a bfloat16 kernel (None when it can)."""
    if kernel == "amx":
        return amx_unusable()
    if kernel == "pairs" and not library().small_gemm_has_avx512bf16():
        return "this CPU has no AVX512-BF16"
    return None


@functools.cache
def amx_unusable() -> str | None:
    """None when the AMX kernel may run in this process, else why not. The kernel is checked
    once per build in a child process (:mod:`racer_bench.engine.amx_probe`: values, row
    invariance, no crash), the verdict cached beside the build, before any model uses it."""
    lib = library()
    if not lib.small_gemm_has_amx():
        return "this CPU has no AMX-BF16 tiles"
    verdict = amx_verdict()
    if verdict is not None:
        return verdict
    if lib.small_gemm_amx_enable() != 0:
        return "Linux refused this process the AMX tile state (arch_prctl)"
    return None


PROBE = (sys.executable, "-m", "racer_bench.engine.amx_probe")


def amx_verdict(command: Sequence[str] = PROBE, timeout_s: float = 120.0) -> str | None:
    """The child-process check of this build's AMX kernel (``command``), cached per machine and
    build: None (passed) or why not."""
    machine = hardware.fingerprint(1)["id"]  # a cache folder may be shared by several machines
    path = kernel_dir() / f"amx-probe-{machine}-{source_digest()}.json"
    if path.exists():
        return json.loads(path.read_text())["unusable"]
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=timeout_s)
        lines = (done.stdout.strip() or done.stderr.strip() or "no verdict").splitlines()
        if done.returncode < 0:
            why = f"the AMX check crashed ({signal.Signals(-done.returncode).name})"
        else:
            why = None if done.returncode == 0 and lines[-1] == "ok" else lines[-1]
    except subprocess.TimeoutExpired:
        why = f"the AMX check took over {timeout_s:.0f} s"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"unusable": why}) + "\n")
    return why


def pair_kernel(weight: torch.Tensor) -> str | None:
    """The kernel of bfloat16 x bfloat16 products a weight [N, K] takes: ``amx`` (K a multiple
    of 32), ``pairs`` (K even), or None (the widening kernel)."""
    if weight.dtype != torch.bfloat16 or weight.shape[1] % 2:
        return None
    kernel = bf16_kernel()
    if kernel == "amx":
        return "amx" if weight.shape[1] % AMX_K == 0 else "pairs"
    return "pairs" if kernel == "pairs" else None


def pack_pairs(weight: torch.Tensor) -> torch.Tensor:
    """Pack BFloat16Tensor[N, K] (K even) in pairs of k for :func:`matmul_pairs` (the AVX512-BF16
    and the AMX kernels read the same layout)."""
    n, k = weight.shape
    w = weight.detach().contiguous()
    packed = torch.empty(((n + PANEL - 1) // PANEL) * k * PANEL, dtype=torch.bfloat16)
    library().small_gemm_pack_pairs(w.data_ptr(), packed.data_ptr(), n, k)
    return packed


def matmul_pairs(
    x: torch.Tensor, packed: torch.Tensor, n: int, kernel: str = "pairs"
) -> torch.Tensor:
    """``x @ W.T`` for x BFloat16Tensor[M, K] and W packed by :func:`pack_pairs`: float32 [M, N],
    on the ``pairs`` or the ``amx`` kernel."""
    x = x.contiguous()
    m, k = x.shape
    y = torch.empty(m, n, dtype=torch.float32)
    if m:
        lib = library()
        run = lib.small_gemm_bf16_amx if kernel == "amx" else lib.small_gemm_bf16_pairs
        run(x.data_ptr(), packed.data_ptr(), y.data_ptr(), m, n, k)
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
    """A weight [N, K] packed for the kernel that suits its dtype and the CPU (bfloat16: AMX or
    AVX512-BF16 pairs, else widening)."""

    def __init__(self, weight: torch.Tensor) -> None:
        self.n, self.k = weight.shape
        self.kernel = pair_kernel(weight)
        self.packed = pack_pairs(weight) if self.kernel else pack(weight)

    @property
    def code(self) -> int:
        """The kernel as decoder_layer.c's ``gemm_weight.pairs`` names it."""
        return KERNEL_CODES[self.kernel]

    def __call__(self, rows: torch.Tensor) -> torch.Tensor:
        """``rows @ W.T`` for rows [M, K] in the weight's dtype -> float32 [M, N]."""
        profiling = torch.autograd._profiler_enabled()  # ctypes calls are invisible to it
        with record_function("racer_bench::small_gemm") if profiling else nullcontext():
            if self.kernel:
                return matmul_pairs(rows, self.packed, self.n, self.kernel)
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
        pairs = self._packed.kernel
        kernel = f"bf16 {pairs}" if pairs else str(self.weight.dtype).removeprefix("torch.")
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
