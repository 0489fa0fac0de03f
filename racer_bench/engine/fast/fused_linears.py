"""Sibling linears that read the same input, run as one packed GEMM (fast engine).

Attention's ``q_proj``/``k_proj``/``v_proj`` and the MLP's ``gate_proj``/``up_proj`` all read
the same hidden states. Packed side by side, one kernel call streams all their weights and
computes every output: fewer calls per layer (each costs a ctypes crossing, two tensor
allocations and a thread-pool barrier) and one larger job that splits better across threads.
The model code stays transformers': the first member called computes the whole group's output
for that input, the others take their slice of it.

Every output element is still one chain over k in order (:mod:`small_gemm`), so the result is
bit for bit that of the unfused :class:`~racer_bench.engine.fast.small_gemm.PackedLinear`, and row
invariance holds as before.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from racer_bench.engine.fast.small_gemm import TYPE_CODES, PackedWeight, takes_kernel

SIBLINGS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


class SiblingGroup:
    """The packed concatenation of sibling weights and the outputs not yet taken."""

    def __init__(self, members: list[nn.Linear]) -> None:
        self.sizes = [m.out_features for m in members]
        biases = [m.bias for m in members]
        self.bias = None if biases[0] is None else torch.cat([b.detach() for b in biases])
        self.packed = PackedWeight(torch.cat([m.weight.detach() for m in members]))
        self.source: torch.Tensor | None = None
        self.pending: dict[int, torch.Tensor] = {}

    def output(self, index: int, x: torch.Tensor) -> torch.Tensor:
        """Member ``index``'s output for ``x`` [..., K] (the group's pass is run when needed)."""
        if self.source is not x or index not in self.pending:
            y = self.packed(x.reshape(-1, x.shape[-1]))
            if self.bias is not None:
                y += self.bias
            y = y.to(x.dtype).view(*x.shape[:-1], sum(self.sizes))
            self.pending = dict(enumerate(y.split(self.sizes, dim=-1)))
            self.source = x
        out = self.pending.pop(index)
        if not self.pending:
            self.source = None  # do not keep the input alive past the last member
        return out


class FusedMember(nn.Module):
    """A drop-in for one sibling ``nn.Linear`` (same ``weight``/``bias`` parameters)."""

    def __init__(self, linear: nn.Linear, group: SiblingGroup, index: int) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        self.group = group
        self.index = index

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """FloatTensor[..., in_features] -> FloatTensor[..., out_features]."""
        if not takes_kernel(x, self.weight):
            return F.linear(x, self.weight, self.bias)
        return self.group.output(self.index, x)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"member {self.index} of {len(self.group.sizes)}")  # fmt: skip


def fusable(linears: list[nn.Module]) -> bool:
    """CPU linears of one dtype the kernel reads, one input size, all with or without bias."""
    if not all(isinstance(m, nn.Linear) for m in linears):
        return False
    first = linears[0].weight
    return first.dtype in TYPE_CODES and all(
        m.weight.dtype == first.dtype
        and m.weight.device.type == "cpu"
        and m.in_features == linears[0].in_features
        and (m.bias is None) == (linears[0].bias is None)
        for m in linears
    )


def fuse_siblings(model: nn.Module) -> int:
    """Replace every fusable sibling set below ``model`` (:data:`SIBLINGS`); returns how many."""
    fused = 0
    for parent in list(model.modules()):
        for names in SIBLINGS:
            linears = [getattr(parent, name, None) for name in names]
            if any(m is None for m in linears) or not fusable(linears):
                continue
            group = SiblingGroup(linears)
            for index, (name, linear) in enumerate(zip(names, linears, strict=True)):
                setattr(parent, name, FusedMember(linear, group, index))
            fused += 1
    return fused
