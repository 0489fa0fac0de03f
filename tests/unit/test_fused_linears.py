"""Sibling linears as one GEMM: bit for bit the unfused kernel's outputs, in any call order."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from racer_bench.engine.fast import fused_linears, kernel_library, small_gemm

pytestmark = pytest.mark.skipif(kernel_library.unavailable_reason() is not None, reason="no kernel")


class Attention(nn.Module):
    def __init__(self, dtype: torch.dtype, bias: bool = False) -> None:
        super().__init__()
        self.q_proj = nn.Linear(64, 48, bias=bias, dtype=dtype)
        self.k_proj = nn.Linear(64, 16, bias=bias, dtype=dtype)
        self.v_proj = nn.Linear(64, 16, bias=bias, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bias", [False, True])
def test_fused_outputs_equal_the_unfused_kernel(dtype, bias) -> None:
    torch.manual_seed(0)
    fused, plain = Attention(dtype, bias), Attention(dtype, bias)
    plain.load_state_dict(fused.state_dict())
    assert fused_linears.fuse_siblings(fused) == 1
    small_gemm.pack_linears(plain)
    x = torch.randn(5, 64).to(dtype)
    with torch.inference_mode():
        for order in (["q_proj", "k_proj", "v_proj"], ["v_proj", "q_proj", "k_proj"]):
            for name in order:
                got, want = getattr(fused, name)(x), getattr(plain, name)(x)
                assert got.dtype == dtype and torch.equal(got, want), name


def test_a_new_input_recomputes_and_large_inputs_take_f_linear() -> None:
    torch.manual_seed(0)
    module = Attention(torch.float32)
    reference = {n: getattr(module, n).weight.detach().clone() for n in ("q_proj", "k_proj")}
    fused_linears.fuse_siblings(module)
    a, b = torch.randn(3, 64), torch.randn(3, 64)
    with torch.inference_mode():
        module.q_proj(a)
        k_b = module.k_proj(b)  # another input than the pending group's: computed for b
        torch.testing.assert_close(k_b, b @ reference["k_proj"].T, rtol=1e-5, atol=1e-5)
        big = torch.randn(small_gemm.MAX_ROWS + 1, 64)
        torch.testing.assert_close(module.q_proj(big), big @ reference["q_proj"].T)


def test_mixed_dtypes_or_bias_are_left_alone() -> None:
    module = Attention(torch.float32)
    module.k_proj = nn.Linear(64, 16, bias=True)
    assert fused_linears.fuse_siblings(module) == 0
    assert isinstance(module.q_proj, nn.Linear)
