"""Building blocks shared by the draft heads: RMSNorm, RoPE, attention, inference mode."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from racer_bench.config.run import Engine
from racer_bench.engine.fast import kernel_library, small_gemm


def for_inference(module: nn.Module, engine: Engine = "auto") -> nn.Module:
    """Eval mode without gradients; unless ``engine`` is eager, float32 CPU linear layers go
    through the fast engine's packed small-M GEMM as the target's do (drafting a few rows at a
    time is exactly what it is for). A head on a GPU, or without the kernel, is left as is.
    """
    module.eval().requires_grad_(False)
    if engine != "eager" and kernel_library.unavailable_reason() is None:
        small_gemm.pack_linears(module)
    return module


class RMSNorm(nn.Module):
    """Llama RMSNorm."""

    def __init__(self, size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


def rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotary embedding of FloatTensor[T, heads, D] at LongTensor[T] positions."""
    dim = x.shape[-1]
    inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    angles = positions.float()[:, None] * inv_freq[None]  # [T, D/2]
    cos = torch.cat([angles.cos(), angles.cos()], -1)[:, None].to(x.dtype)
    sin = torch.cat([angles.sin(), angles.sin()], -1)[:, None].to(x.dtype)
    half = dim // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


class Eagle3Attention(nn.Module):
    """Self-attention whose queries/keys/values read ``[emb; hidden]`` (2H wide; EAGLE-3) or
    inputs of ``cfg["attn_in_size"]`` features (DSpark's block layers read H)."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        super().__init__()
        h, d = cfg["hidden_size"], cfg["head_dim"]
        self.heads, self.kv_heads, self.head_dim = cfg["num_heads"], cfg["num_kv_heads"], d
        self.theta = float(cfg["rope_theta"])
        width = int(cfg.get("attn_in_size") or 2 * h)
        self.q_proj = nn.Linear(width, self.heads * d, bias=False)
        self.k_proj = nn.Linear(width, self.kv_heads * d, bias=False)
        self.v_proj = nn.Linear(width, self.kv_heads * d, bias=False)
        self.o_proj = nn.Linear(self.heads * d, h, bias=False)

    def project_kv(self, x: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values FloatTensor[T, kv_heads, D] of inputs FloatTensor[T, in]."""
        k = self.k_proj(x).view(len(x), self.kv_heads, self.head_dim)
        v = self.v_proj(x).view(len(x), self.kv_heads, self.head_dim)
        return rope(k, pos, self.theta), v

    def forward(
        self, x: torch.Tensor, pos: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
        mask: torch.Tensor,
    ) -> torch.Tensor:  # fmt: skip
        """Queries from x FloatTensor[T, in] over keys/values [S, kv, D]; mask BoolTensor[T, S]."""
        q = rope(self.q_proj(x).view(len(x), self.heads, self.head_dim), pos, self.theta)
        rep = self.heads // self.kv_heads
        k = keys.repeat_interleave(rep, dim=1).transpose(0, 1)  # [heads, S, D]
        v = values.repeat_interleave(rep, dim=1).transpose(0, 1)
        out = F.scaled_dot_product_attention(q.transpose(0, 1), k, v, attn_mask=mask[None])
        return self.o_proj(out.transpose(0, 1).reshape(len(x), -1))
