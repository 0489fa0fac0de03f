"""The fast engine's decode forward for Llama models: one C call for all layers (decoder_layer.c).

A decode or verification step of up to :data:`MAX_ROWS` tokens runs the embedding lookup in
torch, then ``decoder_stack``: ``decoder_layer`` for each layer (norms, fused projections,
rotary embedding, KV write into the preallocated cache, row attention, SiLU MLP, residuals),
then the final norm.
Prefills and anything :func:`unsupported` names keep transformers' own forward. Both write the
same cache (:class:`~racer_bench.engine.kv_cache.PreallocatedLayer` buffers), so they mix
freely within a sequence.

It uses the weights packed by the fast engine (:mod:`fused_linears`, :mod:`small_gemm`) and
follows transformers' Llama roundings in the model's dtype, so its logits are close to, not
equal to, transformers'; what it promises is row invariance: a token's outputs do not depend
on the other tokens of the step (``tests/integration/test_row_invariance.py``).
"""

from __future__ import annotations

import ctypes
from typing import Any

import torch
from torch import nn

from racer_bench.engine import kv_cache
from racer_bench.engine.fast import kernel_library, small_gemm
from racer_bench.engine.fast.fused_linears import FusedMember
from racer_bench.engine.fast.small_gemm import TYPE_CODES, PackedLinear, PackedWeight

MAX_ROWS = small_gemm.MAX_ROWS
OFF_ENV = "RACER_BENCH_NO_LAYER_STACK"  # set: Llama steps go through transformers' modules


class GemmWeight(ctypes.Structure):
    _fields_ = [("packed", ctypes.c_void_p), ("n", ctypes.c_long), ("k", ctypes.c_long),
                ("pairs", ctypes.c_int)]  # fmt: skip


class LayerParams(ctypes.Structure):
    _fields_ = [
        ("dtype", ctypes.c_int),
        ("hidden", ctypes.c_long), ("heads", ctypes.c_long), ("kv_heads", ctypes.c_long),
        ("head_dim", ctypes.c_long), ("inter", ctypes.c_long),
        ("eps", ctypes.c_float), ("scale", ctypes.c_float),
        ("norm1", ctypes.c_void_p), ("norm2", ctypes.c_void_p),
        ("qkv", GemmWeight), ("o", GemmWeight), ("gate_up", GemmWeight), ("down", GemmWeight),
        ("k_cache", ctypes.c_void_p), ("v_cache", ctypes.c_void_p),
        ("cache_head", ctypes.c_long), ("cache_row", ctypes.c_long),
    ]  # fmt: skip


def unsupported(model: nn.Module) -> str | None:
    """Why the layer stack cannot run ``model`` (None when it can)."""
    config = model.config
    if kernel_library.unavailable_reason() is not None:
        return f"no kernels: {kernel_library.unavailable_reason()}"
    if getattr(config, "model_type", None) != "llama":
        return f"model type {getattr(config, 'model_type', None)} (only llama)"
    if getattr(config, "hidden_act", "silu") != "silu" or getattr(config, "mlp_bias", False):
        return "MLP is not a bias-free SiLU"
    if getattr(config, "attention_bias", False) or getattr(config, "sliding_window", None):
        return "attention bias or sliding window"
    if model.dtype not in TYPE_CODES:
        return f"dtype {model.dtype}"
    for layer in model.get_decoder().layers:
        attn, mlp = layer.self_attn, layer.mlp
        parts = (attn.q_proj, attn.k_proj, attn.v_proj, mlp.gate_proj, mlp.up_proj)
        if not all(isinstance(m, FusedMember) for m in parts):
            return "projections are not fused"
        if not (isinstance(attn.o_proj, PackedLinear) and isinstance(mlp.down_proj, PackedLinear)):
            return "o_proj / down_proj are not packed"
    head_dim = model.get_decoder().layers[0].self_attn.head_dim
    return None if head_dim % 2 == 0 and head_dim <= 512 else f"head_dim {head_dim}"


def _gemm(weight: PackedWeight) -> GemmWeight:
    return GemmWeight(weight.packed.data_ptr(), weight.n, weight.k, weight.code)


class LlamaStack:
    """Decode forwards of a Llama model (fast engine) through ``decoder_layer``."""

    def __init__(self, model: nn.Module) -> None:
        body = model.get_decoder()
        config = model.config
        self.embed = body.embed_tokens
        self.norm = body.norm
        self.rotary = body.rotary_emb
        self.dtype = model.dtype
        self.code = TYPE_CODES[model.dtype]
        self.hidden = int(config.hidden_size)
        layers = [self._layer(layer, config) for layer in body.layers]
        self.layers = (LayerParams * len(layers))(*layers)  # decoder_stack's array
        self._bound: list[torch.Tensor | None] = [None] * len(layers)  # key buffer each points to
        first = ctypes.byref(self.layers[0])
        size = kernel_library.library().decoder_layer_scratch(first, MAX_ROWS)
        self.scratch = torch.empty(size, dtype=torch.float32)
        self._cos = self._sin = torch.empty(0)  # [positions so far, head_dim]: cached_rotary

    def _layer(self, layer: nn.Module, config: Any) -> LayerParams:
        attn, mlp = layer.self_attn, layer.mlp
        return LayerParams(
            dtype=self.code, hidden=self.hidden, heads=config.num_attention_heads,
            kv_heads=config.num_key_value_heads, head_dim=attn.head_dim,
            inter=mlp.gate_proj.out_features, eps=layer.input_layernorm.variance_epsilon,
            scale=attn.scaling, norm1=layer.input_layernorm.weight.data_ptr(),
            norm2=layer.post_attention_layernorm.weight.data_ptr(),
            qkv=_gemm(attn.q_proj.group.packed), o=_gemm(attn.o_proj._packed),
            gate_up=_gemm(mlp.gate_proj.group.packed), down=_gemm(mlp.down_proj._packed),
        )  # fmt: skip

    def rotary_tables(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin FloatTensor[T, head_dim] for LongTensor[T] positions, rounded to the dtype
        (transformers computes them in float32 and casts them to the model's dtype)."""
        freqs = positions.float()[:, None] * self.rotary.inv_freq.float()[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        scaling = self.rotary.attention_scaling
        cos = (emb.cos() * scaling).to(self.dtype).float().contiguous()
        sin = (emb.sin() * scaling).to(self.dtype).float().contiguous()
        return cos, sin

    def cached_rotary(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`rotary_tables` read from a table of every position so far (doubled when a
        position passes its end): its ten small tensor ops were about 4 % of a bfloat16 AR
        forward on the 2-core EPYC (8.14 -> 7.79 ms interleaved), and a position's values do
        not depend on the step (``tests/unit/test_layer_stack_rotary.py``)."""
        end = int(positions.max()) + 1
        if end > len(self._cos):
            size = max(2 * len(self._cos), end, 1024)
            self._cos, self._sin = self.rotary_tables(torch.arange(size))
        return self._cos[positions], self._sin[positions]

    def forward(
        self, cache: Any, ids: torch.Tensor, positions: torch.Tensor, visible: torch.Tensor | None
    ) -> torch.Tensor:
        """Final normed hidden states [T, H] of a step over LongTensor[T] ``ids``.

        ``visible``: uint8 [T, past + T] (which keys each token sees) or None (all: T == 1).
        The step's keys and values are appended to ``cache`` (past = its length).
        """
        t = int(ids.shape[0])
        past = kv_cache.cache_length(cache)
        h = self.embed(ids).contiguous()
        cos, sin = self.cached_rotary(positions)
        mask = visible.data_ptr() if visible is not None else None
        self.bind_cache(cache, past + t)
        out = torch.empty_like(h)
        lib = kernel_library.library()  # looked up per step: a kernel A/B swaps it
        args = (h.data_ptr(), t, past, cos.data_ptr(), sin.data_ptr(), mask)
        scratch, eps = self.scratch.data_ptr(), self.norm.variance_epsilon
        if hasattr(lib, "decoder_stack"):
            lib.decoder_stack(self.layers, len(self.layers), *args, self.norm.weight.data_ptr(),
                              eps, out.data_ptr(), scratch)  # fmt: skip
            return out
        for params in self.layers:  # a build from before decoder_stack (kernel A/B)
            lib.decoder_layer(ctypes.byref(params), *args, scratch)
        lib.final_norm(h.data_ptr(), self.norm.weight.data_ptr(), out.data_ptr(), t,
                       self.hidden, eps, self.code, scratch)  # fmt: skip
        return out

    def bind_cache(self, cache: Any, end: int) -> None:
        """Grow every layer of ``cache`` to ``end`` positions and point the layer parameters
        at its key / value buffers (again only where a buffer was replaced: grown, or a new
        sequence's cache)."""
        for i, layer in enumerate(cache.layers):
            keys, values = kv_cache.reserve(layer, end)
            if keys is not self._bound[i]:
                params = self.layers[i]  # a view into the array
                params.k_cache, params.v_cache = keys.data_ptr(), values.data_ptr()
                params.cache_head, params.cache_row = keys.stride(1), keys.stride(2)
                self._bound[i] = keys
