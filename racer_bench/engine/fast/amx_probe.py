"""Check the AMX GEMM in a child process before a model uses it (``python -m
racer_bench.engine.fast.amx_probe``; :func:`racer_bench.engine.fast.bf16_gemm.amx_verdict` runs it).

Why a child: tile code that the CPU or the kernel refuses ends the process (SIGILL, or a tile
state Linux never granted), and the kernel was written on machines without AMX. The child asks
for the tile state, then checks products of random bfloat16 matrices against float64 and every
row alone against the same row inside blocks of 2-40 rows, bit for bit (the row invariance a
tree step needs). It prints ``ok``, or one line saying what failed, as its last line.
"""

from __future__ import annotations

import torch

from racer_bench.engine.fast import kernel_library, small_gemm

SHAPES = ((40, 64), (200, 576), (37, 96))  # (N, K): tails of N, several chunks of K
ROWS = (1, 2, 7, 16, 17, 33, 40)


def check() -> str | None:
    """None when every check passes, else the first failure."""
    lib = kernel_library.library()
    if not lib.small_gemm_has_amx():
        return "this CPU has no AMX-BF16 tiles"
    if lib.small_gemm_amx_enable() != 0:
        return "Linux refused the AMX tile state (arch_prctl)"
    gen = torch.Generator().manual_seed(0)
    for n, k in SHAPES:
        w = torch.randn(n, k, generator=gen).bfloat16()
        packed = small_gemm.pack_pairs(w)
        x = torch.randn(max(ROWS), k, generator=gen).bfloat16()
        got = small_gemm.matmul_pairs(x, packed, n, "amx")
        error = (got.double() - x.double() @ w.double().T).abs().max().item()
        if not error <= 1e-6 * k:
            return f"AMX product off by {error:.3g} at N={n}, K={k}"
        alone = torch.cat([small_gemm.matmul_pairs(x[i : i + 1], packed, n, "amx") for i in
                           range(max(ROWS))])  # fmt: skip
        for m in ROWS:
            if not torch.equal(small_gemm.matmul_pairs(x[:m], packed, n, "amx"), alone[:m]):
                return f"AMX rows depend on the other rows (N={n}, K={k}, {m} rows)"
    return None


def main() -> None:
    why = check()
    print(why or "ok", flush=True)


if __name__ == "__main__":
    main()
