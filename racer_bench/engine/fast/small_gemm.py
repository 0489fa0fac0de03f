"""Small-M GEMM for CPU verification forwards (``csrc/small_gemm.c``, ``csrc/amx_gemm.c``,
through :mod:`racer_bench.engine.fast.kernel_library`): packing, products, and the ``nn.Linear``
drop-in that the fast engine puts in place of every CPU linear layer.

Why a kernel of our own: on the 2-core AVX2 reference machine, MKL's sgemm behind
``F.linear`` runs 2-16-row products (the shape of a speculative step) at a third of the
core's peak, and oneDNN's or MKL's packed paths do not do better (docs/benchmarks.md has the
numbers). The kernel streams each weight once per forward and reuses it across up to 6 rows
in registers (8 in the AVX512-BF16 kernel), prefetching the next weights while it reuses the
current ones for further rows, so forwards of up to ~8 tokens cost about what the weights'
memory traffic costs, and it is batch-invariant (a row's output does not depend on the other
rows). Which bfloat16 kernel runs: :mod:`racer_bench.engine.fast.bf16_gemm`.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function

from racer_bench.engine.fast.bf16_gemm import KERNEL_CODES, pair_kernel
from racer_bench.engine.fast.kernel_library import library

PANEL = 16  # output columns per packed panel (NR in the C source)
# weight / KV element types the kernels read (the C enums)
TYPE_CODES = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}
MAX_ROWS = 128  # more rows (a prefill) take F.linear: MKL's large-M GEMM is built for them


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
