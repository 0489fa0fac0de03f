"""The target model: prefill, one tree-verification forward per step, and commit.

Tree attention uses transformers' custom 4-D float attention mask plus explicit position ids
(``prefix_len + depth``), so no model code is patched. Chains take the plain causal path.

Two engines run the same transformers model code (:meth:`HFTarget.set_engine`):

* ``eager``: transformers as it comes: ``F.linear``, SDPA with ``repeat_kv``, ``DynamicCache``.
* ``fast``: every CPU linear layer (float32, bfloat16, float16) through the packed small-M GEMM
  (:mod:`racer_bench.engine.fast.small_gemm`; q/k/v and gate/up as one GEMM each,
  :mod:`racer_bench.engine.fast.fused_linears`), row-invariant attention for every decode and tree
  step (:mod:`racer_bench.engine.fast.row_attention`), and a preallocated KV cache compacted in
  place (:mod:`racer_bench.engine.kv_cache`). Sliding-window layers get their window from the
  masks built here, one per layer type. Both kernels compute each token's row alone, in a fixed
  order, so a tree node's logits equal bit for bit those of the AR step over the same prefix, at
  every dtype (the row-invariance tests in ``tests/integration/test_row_invariance.py``). For
  Llama models, decode steps skip transformers' modules: one C call for all layers
  (:mod:`racer_bench.engine.fast.llama`; prefills keep transformers' forward).
  ``eager`` is not row-invariant: library GEMMs and SDPA tile by the shapes they are given.

``auto`` picks ``fast`` on a CPU and ``eager`` elsewhere (the GEMM is a CPU kernel; the other
two parts are device-neutral but unmeasured on GPUs, so GPUs keep transformers' path).
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from typing import Any, get_args

import torch

from racer_bench.config.run import Engine
from racer_bench.engine import kv_cache
from racer_bench.engine.fast import (
    bf16_gemm,
    fused_linears,
    kernel_library,
    llama,
    row_attention,
    small_gemm,
)
from racer_bench.engine.structs import Draft
from racer_bench.engine.tree import ancestor_mask, is_chain, node_depths
from racer_bench.errors import ConfigError

ENGINES: tuple[str, ...] = get_args(Engine)


@dataclass
class StepLogits:
    """Output of one verification forward.

    Attributes:
        logits: FloatTensor[N+1, V] for the root and the N draft nodes.
        aux_logits: FloatTensor[A, V] or None for the auxiliary branch.
        hidden: FloatTensor[N+1+A, F] or None (features for model-based drafters; see `features`).
    """

    logits: torch.Tensor
    aux_logits: torch.Tensor | None = None
    hidden: torch.Tensor | None = None


def tree_attention_mask(
    draft: Draft,
    past: int,
    dtype: torch.dtype,
    device: torch.device,
    window: int | None = None,
) -> torch.Tensor:
    """Additive mask FloatTensor[1, 1, T, past + T] for root + nodes (+ aux branch).

    Every row sees the cached prefix; node rows see their ancestors and the root; aux rows see
    the root and the aux positions their own mask allows. With a sliding ``window``, a row at
    position ``p`` also sees only keys at positions ``> p - window`` (transformers' rule).
    """
    n = len(draft)
    aux = draft.aux
    a = 0 if aux is None else len(aux)
    allowed = torch.zeros(n + 1 + a, n + 1 + a, dtype=torch.bool)
    allowed[: n + 1, : n + 1] = ancestor_mask(draft.parents.tolist())
    if aux is not None:
        allowed[n + 1 :, 0] = True
        allowed[n + 1 :, n + 1 :] = aux.mask
    full = torch.ones(n + 1 + a, past + n + 1 + a, dtype=torch.bool)
    full[:, past:] = allowed
    if window is not None:
        offsets = torch.tensor(_offsets(draft))
        query_pos = (past + offsets)[:, None]
        key_pos = torch.cat([torch.arange(past), past + offsets])[None, :]
        full &= query_pos - key_pos < window
    mask = torch.zeros(full.shape, dtype=dtype)
    mask.masked_fill_(~full, torch.finfo(dtype).min)
    return mask[None, None].to(device)


def _offsets(draft: Draft) -> list[int]:
    """Position offsets from the root of root, nodes and aux tokens."""
    offsets = [0, *node_depths(draft.parents.tolist())]
    if draft.aux is not None:
        offsets += draft.aux.depths.tolist()
    return offsets


class HFTarget:
    """A transformers causal LM with a KV cache that only ever holds committed tokens.

    Between steps the cache holds every committed token except the root (the last one).
    """

    def __init__(self, model: Any, tokenizer: Any, name: str = "model") -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.cache: Any = None
        self.max_length = int(getattr(model.config, "max_position_embeddings", 1 << 30))
        self.body = model.get_decoder()
        self.head = model.get_output_embeddings()
        self.softcap = getattr(model.config, "final_logit_softcapping", None)
        params = inspect.signature(self.body.forward).parameters
        self._cache_name = "cache" if "cache" in params else "past_key_values"
        text = model.config.get_text_config(decoder=True)
        self._layer_types = list(getattr(text, "layer_types", None) or [])
        self._window = getattr(text, "sliding_window", None)
        self.engine = "eager"
        self.engine_details: dict[str, Any] = {"engine": "eager"}
        self.layer_stack: llama.LlamaStack | None = None

    def set_engine(self, engine: str) -> str:
        """Switch to ``auto`` / ``eager`` / ``fast`` (see the module docstring); returns the engine.

        ``fast`` cannot be undone on the same target (its linear layers are replaced).
        """
        if engine not in ENGINES:
            raise ConfigError(f"engine={engine}: allowed values are {', '.join(ENGINES)}")
        if engine == "auto":
            engine = "fast" if self.device.type == "cpu" else "eager"
        if engine == self.engine:
            return engine
        if self.engine == "fast":
            raise ConfigError("engine=eager: this target already runs the fast engine")
        why = kernel_library.unavailable_reason() if self.device.type == "cpu" else "not a CPU"
        fused = fused_linears.fuse_siblings(self.model) if why is None else 0
        packed = small_gemm.pack_linears(self.model) if why is None else 0
        self.head = self.model.get_output_embeddings()
        impl = getattr(self.model.config, "_attn_implementation", None)
        if impl == "sdpa":
            self.model.set_attn_implementation(row_attention.register())
        self.engine = "fast"
        stack_off = llama.unsupported(self.model) if why is None else why
        if os.environ.get(llama.OFF_ENV):
            stack_off = f"{llama.OFF_ENV} is set"
        self.layer_stack = llama.LlamaStack(self.model) if stack_off is None else None
        self.engine_details = {
            "engine": "fast",
            "packed_linears": packed,
            "fused_groups": fused,
            "small_gemm": "unavailable: " + why if why else "on",
            "kernels": kernel_library.source_digest(),
            "bf16_gemm": bf16_gemm.bf16_kernel() if why is None else None,
            "amx": (bf16_gemm.amx_unusable() or "on") if why is None else None,
            "attention": getattr(self.model.config, "_attn_implementation", None),
            "kv_cache": "preallocated",
            "layer_stack": "on" if stack_off is None else f"off: {stack_off}",
        }
        return engine

    @property
    def vocab_size(self) -> int:
        return int(self.model.config.vocab_size)

    @property
    def eos_ids(self) -> set[int]:
        """EOS ids of the tokenizer and the generation config (instruct models use several)."""
        ids: set[int] = set()
        for source in (self.tokenizer.eos_token_id, _generation_eos(self.model)):
            if isinstance(source, int):
                ids.add(source)
            elif source:
                ids.update(int(t) for t in source)
        return ids

    def synchronize(self) -> None:
        """Wait for queued device work so wall-clock timings are honest."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    @property
    def length(self) -> int:
        return kv_cache.cache_length(self.cache)

    @torch.inference_mode()
    def prefill(self, ids: list[int], all_logits: bool = False) -> torch.Tensor:
        """Start a sequence: cache ``ids`` and return logits FloatTensor[L or 1, V]."""
        return self.prefill_with_hidden(ids, all_logits, hidden=False)[0]

    @torch.inference_mode()
    def prefill_with_hidden(
        self,
        ids: list[int],
        all_logits: bool = False,
        hidden: bool = True,
        hidden_layers: tuple[int, ...] = (),
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """:meth:`prefill` that also returns the prompt's features FloatTensor[L, F] (or None)."""
        self.cache = kv_cache.new_cache(self.model.config, preallocated=self.engine == "fast")
        input_ids = torch.tensor([ids], dtype=torch.long, device=self.device)
        out = self.body(
            input_ids=input_ids,
            use_cache=True,
            output_hidden_states=bool(hidden and hidden_layers),
            **self._cache_kwarg(),
        )
        last = out.last_hidden_state[0]
        logits = self.logits(last if all_logits else last[-1:])
        return logits, features(out, hidden_layers) if hidden else None

    @torch.inference_mode()
    def forward_tree(
        self, root: int, draft: Draft, hidden: bool = False, hidden_layers: tuple[int, ...] = ()
    ) -> StepLogits:
        """One verification forward over root + draft nodes (+ aux branch).

        ``hidden`` asks for features (see :func:`features`); ``hidden_layers`` chooses them.
        """
        past = self.length
        n = len(draft)
        aux = draft.aux
        tokens = [root, *draft.tokens.tolist()]
        if aux is not None:
            tokens += aux.tokens.tolist()
        input_ids = torch.tensor([tokens], dtype=torch.long, device=self.device)
        positions = torch.tensor([_offsets(draft)], dtype=torch.long, device=self.device) + past
        tree = aux is not None or not is_chain(draft.parents.tolist())
        if self.layer_stack is not None and len(tokens) <= llama.MAX_ROWS and not hidden_layers:
            visible = self._visible(draft, past, len(tokens), tree)
            last = self.layer_stack.forward(self.cache, input_ids[0], positions[0], visible)
            feats = last if hidden else None
        else:
            out = self.body(
                input_ids=input_ids,
                attention_mask=self._tree_masks(draft, past) if tree else None,
                position_ids=positions,
                use_cache=True,
                output_hidden_states=bool(hidden and hidden_layers),
                **self._cache_kwarg(),
            )
            last = out.last_hidden_state[0]
            feats = features(out, hidden_layers) if hidden else None
        logits = self.logits(last)
        return StepLogits(
            logits=logits[: n + 1],
            aux_logits=logits[n + 1 :] if aux is not None else None,
            hidden=feats,
        )

    def _visible(self, draft: Draft, past: int, t: int, tree: bool) -> torch.Tensor | None:
        """uint8 [T, past + T]: the keys each token of the step sees (None: one token, all);
        read from the tree mask, or causal for a chain, as the row attention reads its mask."""
        cpu = torch.device("cpu")
        mask = tree_attention_mask(draft, past, torch.float32, cpu) if tree else None
        return row_attention.visible_rows(mask, t, past + t)

    def _tree_masks(self, draft: Draft, past: int) -> torch.Tensor | dict[str, torch.Tensor]:
        """The tree mask, or one per layer type when the fast engine serves sliding windows.

        The eager engine's ``DynamicCache`` trims sliding layers itself, so it gets one mask.
        """
        full = tree_attention_mask(draft, past, self.dtype, self.device)
        types = set(self._layer_types)
        if self.engine != "fast" or not self._window or types == {"full_attention"}:
            return full
        sliding = tree_attention_mask(draft, past, self.dtype, self.device, self._window)
        if types <= {"sliding_attention"}:  # no layer types: every layer slides (Mistral style)
            return sliding
        return {"full_attention": full, "sliding_attention": sliding}

    def _cache_kwarg(self) -> dict[str, Any]:
        """The cache argument under its name in this transformers version.

        transformers 5.x renamed ``past_key_values`` to ``cache`` in model forwards; supporting
        both keeps the harness usable on the version a GPU image ships.
        """
        return {self._cache_name: self.cache}

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """LM head over FloatTensor[T, H] -> FloatTensor[T, V] (float32 or float64).

        For a few rows on a CPU, ``W @ h.T`` runs 2-3x faster than ``F.linear`` with MKL (the
        tall-skinny GEMM avoids re-packing the vocabulary-sized weight), which is most of a
        speculative step's extra cost over an autoregressive one.
        """
        head = self.head
        if isinstance(head, torch.nn.Linear) and head.bias is None and hidden.shape[0] > 1:
            logits = (head.weight @ hidden.T).T
        else:
            logits = head(hidden)
        if self.softcap:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return _as_float(logits)

    @torch.inference_mode()
    def commit(self, past: int, accepted: list[int]) -> None:
        """Keep the root and the accepted nodes after a forward that started at ``past``."""
        kv_cache.keep_positions(self.cache, past, [0, *(i + 1 for i in accepted)])

    @torch.inference_mode()
    def full_logits(self, ids: list[int]) -> torch.Tensor:
        """Logits FloatTensor[L, V] of a fresh forward over ``ids`` (tests, no cache kept)."""
        input_ids = torch.tensor([ids], dtype=torch.long, device=self.device)
        return _as_float(self.model(input_ids=input_ids, use_cache=False).logits[0])


def features(out: Any, hidden_layers: tuple[int, ...] = ()) -> torch.Tensor:
    """Per-token features FloatTensor[T, F] of a batch-1 body output.

    Empty ``hidden_layers`` = the final normed state (F = H); otherwise the listed entries of
    ``out.hidden_states`` (0 = embeddings, -1 = final normed state) side by side (F = H * n).
    """
    if not hidden_layers:
        return out.last_hidden_state[0]
    return torch.cat([out.hidden_states[i][0] for i in hidden_layers], dim=-1)


def _generation_eos(model: Any) -> int | list[int] | None:
    config = getattr(model, "generation_config", None)
    return getattr(config, "eos_token_id", None) if config is not None else None


def _as_float(logits: torch.Tensor) -> torch.Tensor:
    """Half-precision logits become float32; float32/float64 stay as they are."""
    return logits if logits.dtype in (torch.float32, torch.float64) else logits.float()
