"""The EAGLE-3 draft head: one Llama decoder layer fed ``fc([low, mid, high])`` target features
and the next token's embedding, and its training-time-test loss.

Parameter names follow the published EAGLE-3 checkpoints (``fc``, ``midlayer.*``, ``norm``,
``lm_head``, ``d2t``) so they load unchanged (:mod:`methods.eagle3.checkpoint`).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from methods.common.heads.layers import Eagle3Attention, RMSNorm


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
