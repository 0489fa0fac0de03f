"""Draft heads shared by Medusa and EAGLE-3, their dynamic draft tree, and checkpoint IO.

* :class:`MedusaHeads` -- K residual blocks on the target's last hidden state, each read by a
  frozen copy of the target's LM head restricted to a draft vocabulary (Medusa-1 heads).
* :class:`Eagle3Head` -- one Llama decoder layer fed ``fc([low, mid, high])`` target features
  and the next token's embedding (EAGLE-3). Parameter names follow the published EAGLE-3
  checkpoints (``fc``, ``midlayer.*``, ``norm``, ``lm_head``, ``d2t``) so they load unchanged.
* :func:`grow_tree` -- EAGLE-2-style dynamic tree: expand the ``topk`` best nodes per depth,
  then keep the ``budget`` best nodes by cumulative log-probability.

Both heads predict over a draft vocabulary (``draft_ids``: draft index -> target id, the
``d2t`` of EAGLE-3): a small LM head keeps drafting cheap on a CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from racer_bench.engine import small_gemm
from racer_bench.engine.structs import Draft, Source
from racer_bench.engine.target import Engine
from racer_bench.errors import ConfigError


def for_inference(module: nn.Module, engine: Engine = "auto") -> nn.Module:
    """Eval mode without gradients; unless ``engine`` is eager, float32 CPU linear layers go
    through the fast engine's packed small-M GEMM as the target's do (drafting a few rows at a
    time is exactly what it is for). A head on a GPU, or without the kernel, is left as is.
    """
    module.eval().requires_grad_(False)
    if engine != "eager" and small_gemm.unavailable_reason() is None:
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


class ResBlock(nn.Module):
    """Medusa's ``x + SiLU(W x)``; zero-initialised, so an untrained head copies the LM head."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.linear = nn.Linear(size, size)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + F.silu(self.linear(x))


class MedusaHeads(nn.Module):
    """K Medusa heads sharing one frozen LM head over the draft vocabulary."""

    def __init__(self, hidden_size: int, num_heads: int, num_layers: int, draft_ids: torch.Tensor):
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(*[ResBlock(hidden_size) for _ in range(num_layers)])
            for _ in range(num_heads)
        )
        self.lm_head = nn.Linear(hidden_size, len(draft_ids), bias=False)
        self.lm_head.weight.requires_grad_(False)
        self.register_buffer("draft_ids", draft_ids.long().clone())

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """FloatTensor[T, H] -> logits FloatTensor[K, T, Vd]; head k predicts k + 2 ahead."""
        return torch.stack([self.lm_head(block(hidden)) for block in self.blocks])


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


class Eagle3Layer(nn.Module):
    """EAGLE-3's ``midlayer``: residual stream = the (fused or own) hidden state."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        super().__init__()
        h, eps = cfg["hidden_size"], cfg["rms_eps"]
        self.input_layernorm = RMSNorm(h, eps)
        self.hidden_norm = RMSNorm(h, eps)
        self.self_attn = Eagle3Attention(cfg)
        self.post_attention_layernorm = RMSNorm(h, eps)
        self.mlp = nn.ModuleDict(
            {
                "gate_proj": nn.Linear(h, cfg["intermediate_size"], bias=False),
                "up_proj": nn.Linear(h, cfg["intermediate_size"], bias=False),
                "down_proj": nn.Linear(cfg["intermediate_size"], h, bias=False),
            }
        )

    def inputs(self, emb: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        """Attention input FloatTensor[T, 2H] from token embeddings and hidden states."""
        return torch.cat([self.input_layernorm(emb), self.hidden_norm(hidden)], -1)

    def finish(self, hidden: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        """Residual + MLP after attention; returns the new hidden state FloatTensor[T, H]."""
        h = hidden + attn
        m = self.mlp
        x = self.post_attention_layernorm(h)
        return h + m["down_proj"](F.silu(m["gate_proj"](x)) * m["up_proj"](x))


class Eagle3Head(nn.Module):
    """The EAGLE-3 draft head: embeddings, feature fusion ``fc``, one layer, norm, LM head."""

    def __init__(self, cfg: dict[str, Any], draft_ids: torch.Tensor) -> None:
        super().__init__()
        self.cfg = dict(cfg)
        h = cfg["hidden_size"]
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], h)
        self.embed_tokens.weight.requires_grad_(False)
        self.fc = nn.Linear(cfg["feature_size"], h, bias=False)
        self.midlayer = Eagle3Layer(cfg)
        self.norm = RMSNorm(h, cfg["rms_eps"])
        self.lm_head = nn.Linear(h, len(draft_ids), bias=False)
        self.register_buffer("draft_ids", draft_ids.long().clone())

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """FloatTensor[T, H] -> draft-vocabulary logits FloatTensor[T, Vd]."""
        return self.lm_head(self.norm(hidden))


def eagle3_config(
    hidden_size: int, feature_size: int, vocab_size: int, num_heads: int = 4,
    num_kv_heads: int | None = None, intermediate_size: int | None = None,
    rope_theta: float = 10000.0, rms_eps: float = 1e-5, feature_layers: tuple[int, ...] = (),
) -> dict[str, Any]:  # fmt: skip
    """The head's config dict (saved inside checkpoints)."""
    return {
        "hidden_size": hidden_size,
        "feature_size": feature_size,
        "vocab_size": vocab_size,
        "num_heads": num_heads,
        "num_kv_heads": num_kv_heads or num_heads,
        "head_dim": hidden_size // num_heads,
        "intermediate_size": intermediate_size or 4 * hidden_size,
        "rope_theta": rope_theta,
        "rms_eps": rms_eps,
        "feature_layers": list(feature_layers),
    }


def frequent_tokens(sequences: list[list[int]], size: int, vocab_size: int) -> torch.Tensor:
    """The ``size`` most frequent token ids (ascending id order): a draft vocabulary."""
    counts = torch.zeros(vocab_size, dtype=torch.long)
    for seq in sequences:
        counts += torch.bincount(torch.tensor(seq, dtype=torch.long), minlength=vocab_size)
    size = min(size, vocab_size)
    order = torch.argsort(-counts * vocab_size + torch.arange(vocab_size))  # ties: lower id
    return order[:size].sort().values


Expand = Callable[[list[int], int, list[int], list[int]], torch.Tensor]


def grow_tree(
    root_logp: torch.Tensor, expand: Expand, depth: int, topk: int, budget: int
) -> tuple[list[int], list[int]]:
    """EAGLE-2-style dynamic tree over a draft vocabulary (see :func:`grow_scored_tree`).

    Returns:
        (draft-vocabulary tokens, parents) of the kept nodes, topological.
    """
    tokens, parents, _ = grow_scored_tree(root_logp, expand, depth, topk, budget)
    return tokens, parents


def grow_scored_tree(
    root_logp: torch.Tensor, expand: Expand, depth: int, topk: int, budget: int
) -> tuple[list[int], list[int], list[float]]:
    """EAGLE-2-style dynamic tree: expand the ``topk`` best nodes per depth, keep ``budget``.

    Args:
        root_logp: FloatTensor[Vd] log-scores of the depth-1 tokens (log-probabilities for
            EAGLE/Medusa, log predicted acceptance for DSpark).
        expand: ``expand(frontier, d, tokens, parents)`` -> FloatTensor[F, Vd] log-scores of the
            children (depth ``d``) of the frontier nodes; ``tokens``/``parents`` describe
            every node so far.
        depth: maximum node depth; topk: children per frontier node and frontier width;
        budget: nodes kept.

    Returns:
        (draft-vocabulary tokens, parents, each node's own log-score) of the kept nodes, in
        topological order; a node's path score is the sum of its ancestors' and its own.
    """
    if depth < 1 or budget < 1:
        return [], [], []
    lp, ix = root_logp.topk(min(topk, root_logp.numel()))
    tokens, parents, scores = ix.tolist(), [-1] * len(ix), lp.tolist()
    local = list(scores)
    frontier = list(range(len(tokens)))
    for d in range(2, depth + 1):
        logp = expand(frontier, d, tokens, parents)
        lp, ix = logp.topk(min(topk, logp.shape[-1]), dim=-1)  # [F, k]
        cand = torch.tensor([scores[i] for i in frontier], dtype=lp.dtype)[:, None] + lp
        first = len(tokens)
        for row, node in enumerate(frontier):
            tokens += ix[row].tolist()
            parents += [node] * ix.shape[1]
        scores += cand.flatten().tolist()
        local += lp.flatten().tolist()
        best = cand.flatten().topk(min(topk, cand.numel())).indices
        frontier = [first + int(b) for b in best]
    kept = _best_indices(parents, scores, budget)
    return *_reindex(tokens, parents, kept), [local[i] for i in kept]


def _best_nodes(
    tokens: list[int], parents: list[int], scores: list[float], budget: int
) -> tuple[list[int], list[int]]:
    """The ``budget`` best-scoring nodes whose ancestors are all kept, re-indexed."""
    return _reindex(tokens, parents, _best_indices(parents, scores, budget))


def _reindex(tokens: list[int], parents: list[int], kept: list[int]) -> tuple[list[int], list[int]]:
    """(tokens, parents) of the ``kept`` nodes (ascending, closed under parents), re-indexed."""
    index = {old: new for new, old in enumerate(kept)}
    return [tokens[i] for i in kept], [index[parents[i]] if parents[i] >= 0 else -1 for i in kept]


def _best_indices(parents: list[int], scores: list[float], budget: int) -> list[int]:
    """Indices (ascending) of the ``budget`` best-scoring nodes whose ancestors are all kept."""
    kept: set[int] = set()
    for i in sorted(range(len(parents)), key=lambda i: (-scores[i], i)):
        if len(kept) >= budget:
            break
        if parents[i] < 0 or parents[i] in kept:
            kept.add(i)
    return sorted(kept)


def tree_draft(
    tokens: list[int],
    parents: list[int],
    draft_ids: torch.Tensor,
    probs: list[float] | None = None,
) -> Draft:
    """A :class:`Draft` of MODEL nodes from draft-vocabulary tokens (``probs``: Draft.score)."""
    ids = draft_ids[torch.tensor(tokens, dtype=torch.long)] if tokens else torch.zeros(0)
    return Draft(
        tokens=ids.long(),
        parents=torch.tensor(parents, dtype=torch.long),
        source=torch.full((len(tokens),), int(Source.MODEL), dtype=torch.int32),
        score=None if probs is None else torch.tensor(probs, dtype=torch.float32),
    )


def save_checkpoint(path: Path, kind: str, config: dict[str, Any], module: nn.Module) -> None:
    """Write ``{kind, config, state}`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save({"kind": kind, "config": config, "state": module.state_dict()}, tmp)
    tmp.rename(path)


def load_checkpoint(path: str, kind: str) -> dict[str, Any]:
    """A checkpoint written by :func:`save_checkpoint`; ConfigError names the fix if missing."""
    file = Path(path).expanduser()
    if not file.exists():
        raise ConfigError(
            f"method.checkpoint={path}: no such file; train it with "
            f"python scripts/train_drafter.py kind={kind} (or set method.checkpoint=null)"
        )
    data = torch.load(file, map_location="cpu", weights_only=False)
    if data.get("kind") != kind:
        raise ConfigError(f"method.checkpoint={path}: holds {data.get('kind')}, not {kind}")
    return data


def load_eagle3(path: str, embed_from: str | None = None) -> Eagle3Head:
    """An EAGLE-3 head from a checkpoint trained here (file) or a published one (folder)."""
    file = Path(path).expanduser()
    if file.is_dir():
        cfg, state = published_eagle3(file, embed_from)
    else:
        data = load_checkpoint(path, "eagle3")
        cfg, state = data["config"], data["state"]
    head = Eagle3Head(cfg, state["draft_ids"])
    head.load_state_dict(state)
    return head


def published_eagle3(folder: Path, embed_from: str | None) -> tuple[dict[str, Any], dict]:
    """Config and mapped state dict of a published EAGLE-3 folder (SafeAILab/SpecForge)."""
    import json

    raw = json.loads((folder / "config.json").read_text())
    state = map_eagle3_state(_read_weights(folder))
    if "embed_tokens.weight" not in state:
        if embed_from is None:
            raise ConfigError(
                f"method.checkpoint={folder}: no embed_tokens; set method.embed_from to the "
                "target model folder (its embedding matrix is shared)"
            )
        state["embed_tokens.weight"] = _embedding(Path(embed_from).expanduser())
    hidden = int(raw["hidden_size"])
    cfg = eagle3_config(
        hidden, int(state["fc.weight"].shape[1]), int(state["embed_tokens.weight"].shape[0]),
        num_heads=int(raw["num_attention_heads"]),
        num_kv_heads=int(raw.get("num_key_value_heads", raw["num_attention_heads"])),
        intermediate_size=int(raw["intermediate_size"]),
        rope_theta=float(raw.get("rope_theta", 10000.0)),
        rms_eps=float(raw.get("rms_norm_eps", 1e-6)),
    )  # fmt: skip
    cfg["head_dim"] = int(raw.get("head_dim") or hidden // cfg["num_heads"])
    return cfg, state


def map_eagle3_state(raw: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Published EAGLE-3 weight names -> :class:`Eagle3Head` names.

    ``model.`` prefixes are dropped, ``layers.0.`` becomes ``midlayer.``, ``d2t`` offsets
    (target id = draft id + d2t) become absolute ``draft_ids``, and ``t2d`` is dropped.
    """
    state: dict[str, torch.Tensor] = {}
    for name, tensor in raw.items():
        key = name.removeprefix("model.")
        key = "midlayer." + key.removeprefix("layers.0.") if key.startswith("layers.0.") else key
        if key == "t2d":
            continue
        if key == "d2t":
            state["draft_ids"] = torch.arange(len(tensor)) + tensor.long()
            continue
        state[key] = tensor.float()
    if "draft_ids" not in state:  # full-vocabulary head
        state["draft_ids"] = torch.arange(state["lm_head.weight"].shape[0])
    return state


def _read_weights(folder: Path) -> dict[str, torch.Tensor]:
    files = sorted(folder.glob("*.safetensors"))
    if files:
        from safetensors.torch import load_file

        out: dict[str, torch.Tensor] = {}
        for f in files:
            out.update(load_file(str(f)))
        return out
    bin_file = folder / "pytorch_model.bin"
    if not bin_file.exists():
        raise ConfigError(f"method.checkpoint={folder}: no *.safetensors or pytorch_model.bin")
    return torch.load(bin_file, map_location="cpu", weights_only=True)


def _embedding(folder: Path) -> torch.Tensor:
    """The ``embed_tokens`` matrix of a target model folder (safetensors)."""
    from safetensors import safe_open

    for f in sorted(folder.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as handle:
            for key in handle.keys():  # noqa: SIM118 -- safe_open has no __iter__
                if key.endswith("embed_tokens.weight"):
                    return handle.get_tensor(key).float()
    raise ConfigError(f"method.embed_from={folder}: no embed_tokens.weight in *.safetensors")


def draft_labels(ids: torch.Tensor, draft_ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Target ids LongTensor[T] -> draft-vocabulary labels (-100 where not in it)."""
    lookup = torch.full((vocab_size,), -100, dtype=torch.long)
    lookup[draft_ids] = torch.arange(len(draft_ids))
    return lookup[ids]


def medusa_loss(
    heads: MedusaHeads, hidden: torch.Tensor, labels: torch.Tensor, decay: float = 0.8
) -> torch.Tensor:
    """Medusa-1 loss on one sequence: head k at position t predicts ``labels[t + k + 2]``.

    Args:
        hidden: FloatTensor[T, H] target last hidden states; labels: LongTensor[T] draft labels.
    """
    logits = heads(hidden)  # [K, T, Vd]
    total = hidden.new_zeros(())
    for k in range(len(logits)):
        shift = k + 2
        if len(labels) <= shift:
            break
        target = labels[shift:]
        loss = F.cross_entropy(logits[k, : len(target)], target, ignore_index=-100)
        if torch.isfinite(loss):
            total = total + decay**k * loss
    return total


def eagle3_loss(
    head: Eagle3Head, feats: torch.Tensor, ids: torch.Tensor, labels: torch.Tensor,
    steps: int = 3, decay: float = 0.8,
) -> torch.Tensor:  # fmt: skip
    """EAGLE-3 training-time-test loss on one sequence of T tokens: step ``j``'s cross-entropy
    (:func:`eagle3_step_logits`) weighted ``decay**j``.

    Args:
        feats: FloatTensor[T, F]; ids: LongTensor[T] token ids; labels: LongTensor[T] draft labels.
    """
    target = torch.cat([labels[2:], labels.new_full((1,), -100)])  # [n]
    total = feats.new_zeros(())
    for j, logits in enumerate(eagle3_step_logits(head, feats, ids, steps)):
        valid = target.clone()
        valid[:j] = -100  # no committed context at these positions
        loss = F.cross_entropy(logits, valid, ignore_index=-100)
        if torch.isfinite(loss):
            total = total + decay**j * loss
    return total


def eagle3_step_logits(
    head: Eagle3Head, feats: torch.Tensor, ids: torch.Tensor, steps: int
) -> list[torch.Tensor]:
    """Training-time-test logits of one sequence: ``steps`` tensors FloatTensor[T - 1, Vd].

    Pair ``i`` = (target features ``feats[i]``, token ``ids[i + 1]``) predicts the token at
    ``i + 2``. Step ``j`` re-feeds step ``j - 1``'s output at ``i - 1`` as the hidden input,
    attending to step-0 keys up to ``i - j`` and to step ``s`` keys at ``i - j + s`` only, as
    in drafting.
    """
    n = len(ids) - 1  # pairs
    layer = head.midlayer
    pos = torch.arange(n)
    emb = head.embed_tokens(ids[1:])
    hidden = head.fc(feats[:n])
    keys, values, out_logits = [], [], []
    out = hidden
    for j in range(steps):
        if j:
            hidden = torch.cat([hidden.new_zeros(1, hidden.shape[-1]), out[:-1]])
        x = layer.inputs(emb, hidden)
        k, v = layer.self_attn.project_kv(x, pos)
        keys.append(k)
        values.append(v)
        attn = layer.self_attn(x, pos, torch.cat(keys), torch.cat(values), ttt_mask(n, j))
        out = layer.finish(hidden, attn)
        out_logits.append(head.logits(out))
    return out_logits


def ttt_mask(n: int, step: int) -> torch.Tensor:
    """BoolTensor[n, n * (step + 1)]: step-``step`` queries over keys of steps 0..step."""
    i = torch.arange(n)[:, None]
    cols = [torch.arange(n)[None] <= i - step]  # committed pairs
    for s in range(1, step + 1):
        cols.append(torch.arange(n)[None] == i - step + s)  # the chain drafted so far
    return torch.cat(cols, dim=1)  # the diagonal (s = step) keeps every row non-empty
