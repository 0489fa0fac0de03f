"""DSpark's network: a parallel block backbone, a Markov head and a confidence head.

Shapes: ``H`` the backbone width (the target's hidden size), ``F`` the fused target feature
width, ``Vd`` the draft vocabulary, ``g`` the block size (positions drafted per pass), ``r``
the Markov rank.

* Backbone (DFlash-style block drafter): the committed context enters as keys/values of every
  layer, projected from ``ctx_norm(fc(features))`` (the target's fused low/mid/high hidden
  states, as EAGLE-3); a block of ``g`` rows -- row 0 the root token's (RMS-normed)
  embedding, rows ``1..`` learned per-offset "mask" embeddings, each plus the context vector
  of the last committed position -- attends to the whole context and bidirectionally to
  itself. Row ``k`` predicts the token at depth ``k + 1`` (base logits ``U_k``).
* Markov head: ``B_k(v) = gate_k * (W1 e[x_{k-1}]) . W2[v]`` with ``e`` the target's frozen
  embedding of the previous token (the root for ``k = 0``), ``W1: H -> r``, ``W2: r -> Vd``
  (zero-initialised, so an untrained head adds nothing) and ``gate_k = sigmoid(w . [h_k; m])``.
* Confidence head: ``c_k = sigmoid(w . [h_k; m_k] / T_k)`` with ``m_k = W1 e[x_{k-1}]``; ``T_k``
  (buffer ``conf_temperature``) comes from left-to-right calibration
  (:func:`methods.common.calibration.sequential_temperatures`).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from methods.common.heads.layers import Eagle3Attention, RMSNorm, rope

KV = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys, values [S, kv_heads, D]
BLOCK_INPUTS = ("normed", "concat", "sum")


def dspark_config(
    hidden_size: int, feature_size: int, vocab_size: int, block_size: int = 6,
    num_layers: int = 2, num_heads: int = 8, num_kv_heads: int | None = None,
    intermediate_size: int | None = None, markov_rank: int = 128, markov_gate: bool = True,
    rope_theta: float = 10000.0, rms_eps: float = 1e-5, feature_layers: tuple[int, ...] = (),
    block_input: str = "normed", causal: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """The head's config dict (saved inside checkpoints). ``block_input``: how block rows are
    formed (see :meth:`DSparkHead.block_inputs`); checkpoints without the key are ``"sum"``.
    ``causal``: block row k attends to rows 0..k only (else to the whole block), so row 0 does
    not depend on the block size and can also be trained alone (``root_anchors``)."""
    if block_input not in BLOCK_INPUTS:
        raise ValueError(f"block_input={block_input!r}: allowed values are {BLOCK_INPUTS}")
    return {
        "block_input": block_input,
        "causal": causal,
        "hidden_size": hidden_size,
        "attn_in_size": hidden_size,
        "feature_size": feature_size,
        "vocab_size": vocab_size,
        "block_size": block_size,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "num_kv_heads": num_kv_heads or num_heads,
        "head_dim": hidden_size // num_heads,
        "intermediate_size": intermediate_size or 4 * hidden_size,
        "markov_rank": markov_rank,
        "markov_gate": markov_gate,
        "rope_theta": rope_theta,
        "rms_eps": rms_eps,
        "feature_layers": list(feature_layers),
    }


class DSparkLayer(nn.Module):
    """Pre-norm transformer layer whose attention also reads the context keys/values."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        super().__init__()
        h, eps, inner = cfg["hidden_size"], cfg["rms_eps"], cfg["intermediate_size"]
        self.input_layernorm = RMSNorm(h, eps)
        self.self_attn = Eagle3Attention(cfg)
        self.post_attention_layernorm = RMSNorm(h, eps)
        self.gate_proj = nn.Linear(h, inner, bias=False)
        self.up_proj = nn.Linear(h, inner, bias=False)
        self.down_proj = nn.Linear(inner, h, bias=False)

    def forward(
        self, x: torch.Tensor, pos: torch.Tensor, ctx: tuple[torch.Tensor, torch.Tensor],
        mask: torch.Tensor,
    ) -> torch.Tensor:  # fmt: skip
        """Block rows FloatTensor[M, H] at positions [M] over context keys/values [S, kv, D]
        and themselves; mask BoolTensor[M, S + M]."""
        xn = self.input_layernorm(x)
        k, v = self.self_attn.project_kv(xn, pos)
        keys, values = torch.cat([ctx[0], k]), torch.cat([ctx[1], v])
        return self.mlp(x + self.self_attn(xn, pos, keys, values, mask))

    def forward_blocks(
        self, x: torch.Tensor, pos: torch.Tensor, ctx: tuple[torch.Tensor, torch.Tensor],
        ctx_len: torch.Tensor, causal: bool = False,
    ) -> torch.Tensor:  # fmt: skip
        """:meth:`forward` for A independent blocks FloatTensor[A, g, H] (training)."""
        return self.mlp(x + block_attention(self.self_attn, self.input_layernorm(x), pos, ctx,
                                            ctx_len, causal))  # fmt: skip

    def mlp(self, h: torch.Tensor) -> torch.Tensor:
        """Residual MLP of the post-attention stream FloatTensor[..., H]."""
        y = self.post_attention_layernorm(h)
        return h + self.down_proj(F.silu(self.gate_proj(y)) * self.up_proj(y))


def block_attention(
    attn: Eagle3Attention, xn: torch.Tensor, pos: torch.Tensor,
    ctx: tuple[torch.Tensor, torch.Tensor], ctx_len: torch.Tensor, causal: bool = False,
) -> torch.Tensor:  # fmt: skip
    """Attention of ``A`` independent blocks of ``g`` rows (training): each row reads the first
    ``ctx_len[a]`` context keys and its own block's keys (with ``causal``, those of rows up to
    its own only).

    Equal to one masked attention over ``[context; all blocks]`` with a block-diagonal mask,
    without computing the ``(A g)^2`` block-to-block scores that mask throws away, so a step
    can train on every answer position at the cost of its own rows.

    Args:
        xn: normed rows FloatTensor[A, g, H]; pos: positions LongTensor[A, g]; ctx: context
            keys/values [S, kv, D]; ctx_len: LongTensor[A].

    Returns:
        FloatTensor[A, g, H] (after ``o_proj``).
    """
    a, g, _ = xn.shape
    heads, kv_heads, d = attn.heads, attn.kv_heads, attn.head_dim
    flat = xn.reshape(a * g, -1)
    q = rope(attn.q_proj(flat).view(a * g, heads, d), pos.flatten(), attn.theta)
    q = q.view(a, g, heads, d) * d**-0.5
    k, v = attn.project_kv(flat, pos.flatten())
    rep = heads // kv_heads
    kc, vc = (t.repeat_interleave(rep, dim=1) for t in ctx)  # [S, heads, D]
    kb, vb = (t.view(a, g, kv_heads, d).repeat_interleave(rep, dim=2) for t in (k, v))
    s_ctx = torch.einsum("aghd,shd->ahgs", q, kc)  # [A, heads, g, S]
    hidden = torch.arange(len(kc))[None] >= ctx_len[:, None]  # [A, S]
    s_ctx = s_ctx.masked_fill(hidden[:, None, None], float("-inf"))
    s_blk = torch.einsum("aghd,akhd->ahgk", q, kb)  # [A, heads, g, g]
    if causal:
        later = torch.ones(g, g, dtype=torch.bool).triu(1)
        s_blk = s_blk.masked_fill(later, float("-inf"))
    p = torch.cat([s_ctx, s_blk], -1).softmax(-1)
    s = len(kc)
    out = torch.einsum("ahgs,shd->aghd", p[..., :s], vc)
    out = out + torch.einsum("ahgk,akhd->aghd", p[..., s:], vb)
    return attn.o_proj(out.reshape(a * g, heads * d)).view(a, g, -1)


class DSparkHead(nn.Module):
    """Block backbone + Markov head + confidence head over a draft vocabulary."""

    def __init__(self, cfg: dict[str, Any], draft_ids: torch.Tensor) -> None:
        super().__init__()
        self.cfg = dict(cfg)
        h, r, g = cfg["hidden_size"], cfg["markov_rank"], cfg["block_size"]
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], h)
        self.embed_tokens.weight.requires_grad_(False)
        self.fc = nn.Linear(cfg["feature_size"], h, bias=False)
        self.ctx_norm = RMSNorm(h, cfg["rms_eps"])
        # "normed": the root's embedding is RMS-normed and the mask rows start at unit RMS, so
        # neither is swamped by the normed context vector they are added to (a raw embedding
        # of SmolLM2 has RMS ~0.13 against the context vector's ~1: the root was nearly
        # invisible to the block, "sum", version 1).
        mode = cfg.get("block_input", "sum")
        self.token_norm = RMSNorm(h, cfg["rms_eps"]) if mode != "sum" else None
        self.offset_embed = nn.Parameter(torch.randn(g, h) * (1.0 if mode != "sum" else 0.02))
        # "concat" (EAGLE-3's way of fusing a token with a feature): [token part; context
        # vector] -> H by its own projection, initialised to their sum ("normed").
        self.in_proj = nn.Linear(2 * h, h, bias=False) if mode == "concat" else None
        if self.in_proj is not None:
            self.in_proj.weight.data.copy_(torch.cat([torch.eye(h), torch.eye(h)], 1))
        self.layers = nn.ModuleList(DSparkLayer(cfg) for _ in range(cfg["num_layers"]))
        self.norm = RMSNorm(h, cfg["rms_eps"])
        self.lm_head = nn.Linear(h, len(draft_ids), bias=False)
        self.markov_in = nn.Linear(h, r, bias=False)
        self.markov_out = nn.Linear(r, len(draft_ids), bias=False)
        nn.init.zeros_(self.markov_out.weight)
        self.markov_gate = nn.Linear(h + r, 1) if cfg["markov_gate"] else None
        self.confidence = nn.Linear(h + r, 1)
        self.register_buffer("draft_ids", draft_ids.long().clone())
        self.register_buffer("conf_temperature", torch.ones(g))

    @property
    def causal(self) -> bool:
        return bool(self.cfg.get("causal", False))

    @property
    def block_size(self) -> int:
        return int(self.cfg["block_size"])

    def context(self, feats: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, KV]:
        """Context vectors FloatTensor[T, H] of target features FloatTensor[T, F] at positions
        [T], and their per-layer keys/values."""
        c = self.ctx_norm(self.fc(feats))
        return c, [layer.self_attn.project_kv(c, pos) for layer in self.layers]

    def block_inputs(self, roots: torch.Tensor, last: torch.Tensor, size: int) -> torch.Tensor:
        """FloatTensor[A, size, H]: every row = the last context vector ``last``
        FloatTensor[A, H] (the state before the root) + a token part: for row 0 the root's
        normed embedding, for row k > 0 the learned mask embedding of offset k
        (``block_input="sum"``: offset embedding + raw root embedding on row 0;
        ``"concat"``: ``in_proj([token part; last])`` instead of the sum)."""
        root = self.embed_tokens(roots)
        if self.token_norm is None:
            x = self.offset_embed[:size][None] + last[:, None]
            x[:, 0] += root
            return x
        token = self.offset_embed[:size][None].expand(len(roots), -1, -1).clone()
        token[:, 0] = self.token_norm(root)
        ctx = last[:, None].expand(-1, size, -1)
        if self.in_proj is not None:
            return self.in_proj(torch.cat([token, ctx], -1))
        return token + ctx

    def hidden(
        self, x: torch.Tensor, pos: torch.Tensor, ctx: KV, mask: torch.Tensor
    ) -> torch.Tensor:
        """Normed block states FloatTensor[M, H] of block rows x FloatTensor[M, H]."""
        for layer, kv in zip(self.layers, ctx, strict=True):
            x = layer(x, pos, kv, mask)
        return self.norm(x)

    def hidden_blocks(
        self, x: torch.Tensor, pos: torch.Tensor, ctx: KV, ctx_len: torch.Tensor
    ) -> torch.Tensor:
        """Normed states FloatTensor[A, g, H] of A blocks FloatTensor[A, g, H] at positions
        [A, g], block ``a`` reading the first ``ctx_len[a]`` context positions (training)."""
        for layer, kv in zip(self.layers, ctx, strict=True):
            x = layer.forward_blocks(x, pos, kv, ctx_len, self.causal)
        return self.norm(x)

    def draft_block(
        self, root: int, last: torch.Tensor, ctx: KV, past: int, size: int
    ) -> torch.Tensor:
        """States FloatTensor[size, H] of one block after ``past`` context positions, the last
        of which has context vector ``last`` FloatTensor[H]."""
        x = self.block_inputs(torch.tensor([root]), last[None], size)[0]
        pos = torch.arange(past, past + size)
        mask = torch.ones(size, past + size, dtype=torch.bool)
        if self.causal:
            mask[:, past:] = torch.ones(size, size, dtype=torch.bool).tril()
        return self.hidden(x, pos, ctx, mask)

    def base_logits(self, h: torch.Tensor) -> torch.Tensor:
        """Parallel logits U FloatTensor[..., Vd] of block states FloatTensor[..., H]."""
        return self.lm_head(h)

    def markov(self, prev: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Bias FloatTensor[N, Vd] and low-rank code m FloatTensor[N, r] of previous target ids
        LongTensor[N] at block states FloatTensor[N, H]."""
        m = self.markov_in(self.embed_tokens(prev))
        bias = self.markov_out(m)
        if self.markov_gate is not None:
            bias = torch.sigmoid(self.markov_gate(torch.cat([h, m], -1))) * bias
        return bias, m

    def confidence_logit(self, h: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        """Uncalibrated confidence logits FloatTensor[N] (acceptance of the argmax token)."""
        return self.confidence(torch.cat([h, m], -1))[:, 0]


def pass_last_feature(head: DSparkHead) -> None:
    """Start a fresh head where the target's LM head already works (Medusa's trick).

    ``fc`` copies the last listed feature layer (the others start at zero) and every layer's
    output projections (``o_proj``, ``down_proj``) start at zero, so an untrained block is the
    identity on its rows: row 0 reads ``ctx_norm(feature[t - 1]) + root`` through the target's
    LM head rows. Training then learns the shift to the next position instead of learning the
    feature-to-vocabulary map from a random ``fc``.
    """
    h = head.cfg["hidden_size"]
    with torch.no_grad():
        head.fc.weight.zero_()
        head.fc.weight[:, -h:] = torch.eye(h)
        for layer in head.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.down_proj.weight.zero_()


def acceptance_scores(logits: torch.Tensor, conf: torch.Tensor) -> torch.Tensor:
    """Predicted conditional acceptance of every candidate token, FloatTensor[N, Vd].

    The argmax token gets the confidence ``conf`` (FloatTensor[N]); another token ``v`` gets
    ``(1 - conf) * p(v) / (1 - p(argmax))``: the chance that the target rejects the argmax and
    picks ``v``, with the drafter's distribution renormalised over the rest. Rows sum to 1.
    """
    p = logits.float().softmax(-1)
    top = p.argmax(-1, keepdim=True)
    p_top = p.gather(-1, top)
    rest = p / (1.0 - p_top).clamp_min(1e-6) * (1.0 - conf.float())[:, None]
    return rest.scatter(-1, top, conf.float()[:, None])


def block_outputs(
    head: DSparkHead, feats: torch.Tensor, ids: torch.Tensor, labels: torch.Tensor,
    anchors: torch.Tensor, size: int | None = None,
    context: tuple[torch.Tensor, KV] | None = None,
) -> dict[str, torch.Tensor]:  # fmt: skip
    """Teacher-forced blocks at ``anchors`` of one sequence, for training and calibration.

    Block ``a`` has root ``ids[t_a]``, context ``feats[:t_a]`` and labels ``labels[t_a + 1 ..
    t_a + g]``; the Markov head sees the true previous tokens (the prefix a verifier accepted).

    Args:
        feats: FloatTensor[T, F]; ids: LongTensor[T] target ids; labels: LongTensor[T] draft
            labels (-100 outside the draft vocabulary); anchors: LongTensor[A], 0 < t_a < T - 1.
        size: rows per block ``g`` (default the head's block size; fewer rows are the first
            rows of a full block only for a causal head); context: ``head.context(feats, ...)``
            if already computed.

    Returns:
        ``logits`` [A, g, Vd], ``labels`` [A, g] (-100: past the end or not draftable),
        ``inside`` [A, g] (position inside the sequence), ``accepted`` [A, g] (argmax ==
        label), ``conf_logit`` [A, g] (from detached states).
    """
    n, g, a = len(ids), size or head.block_size, len(anchors)
    hsize = head.cfg["hidden_size"]
    c, ctx = context if context is not None else head.context(feats, torch.arange(n))
    offs = torch.arange(g)
    pos = anchors[:, None] + offs[None]  # [A, g]
    x = head.block_inputs(ids[anchors], c[anchors - 1], g)
    h = head.hidden_blocks(x, pos, ctx, anchors).reshape(a * g, hsize)  # [A*g, H]
    tgt = anchors[:, None] + offs[None] + 1  # label positions [A, g]
    inside = tgt < n
    tgt = tgt.clamp_max(n - 1)
    lab = labels[tgt].masked_fill(~inside, -100)
    bias, m = head.markov(ids[tgt - 1].flatten(), h)
    logits = (head.base_logits(h) + bias).view(a, g, -1)
    accepted = (logits.argmax(-1) == lab) & (lab >= 0)
    conf_logit = head.confidence_logit(h.detach(), m.detach()).view(a, g)
    return {"logits": logits, "labels": lab, "inside": inside, "accepted": accepted,
            "conf_logit": conf_logit}  # fmt: skip


def dspark_loss(
    head: DSparkHead, feats: torch.Tensor, ids: torch.Tensor, labels: torch.Tensor,
    anchors: torch.Tensor, decay: float = 0.8, conf_weight: float = 0.5,
    root_anchors: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:  # fmt: skip
    """Block cross-entropy (position ``k`` weighted ``decay**k``) + confidence BCE.

    ``root_anchors`` LongTensor[B] (causal heads only) add one-row blocks: more first-position
    examples, the position that decides most of the accepted length, at a quarter of a
    4-row block's cost. Position 0's cross-entropy and the confidence loss average over both.

    Returns the loss and its parts (``ce``, ``conf``, ``acc1``: teacher-forced acceptance of
    the first position) for logging. Shapes as in :func:`block_outputs`.
    """
    context = head.context(feats, torch.arange(len(ids)))
    out = block_outputs(head, feats, ids, labels, anchors, context=context)
    logits, lab = out["logits"], out["labels"]
    ce = F.cross_entropy(logits.flatten(0, 1), lab.flatten(), ignore_index=-100, reduction="none")
    ce = ce.view(lab.shape)
    valid = lab >= 0
    per_pos = (ce * valid).sum(0) / valid.sum(0).clamp_min(1)
    inside = out["inside"]
    conf_z, conf_y = out["conf_logit"][inside], out["accepted"][inside]
    first = out["accepted"][:, 0][inside[:, 0]]
    if root_anchors is not None and len(root_anchors):
        if not head.causal:
            raise ValueError("root_anchors need a causal head (row 0 must not read later rows)")
        solo = block_outputs(head, feats, ids, labels, root_anchors, size=1, context=context)
        solo_ce = F.cross_entropy(solo["logits"][:, 0], solo["labels"][:, 0], ignore_index=-100,
                                  reduction="none")  # fmt: skip
        ce0 = torch.cat([ce[:, 0], solo_ce])
        valid0 = torch.cat([valid[:, 0], solo["labels"][:, 0] >= 0])
        per_pos = torch.cat([((ce0 * valid0).sum() / valid0.sum().clamp_min(1))[None],
                             per_pos[1:]])  # fmt: skip
        keep = solo["inside"][:, 0]
        conf_z = torch.cat([conf_z, solo["conf_logit"][:, 0][keep]])
        conf_y = torch.cat([conf_y, solo["accepted"][:, 0][keep]])
        first = torch.cat([first, solo["accepted"][:, 0][keep]])
    weights = decay ** torch.arange(lab.shape[1], dtype=ce.dtype)
    ce_loss = (weights * per_pos).sum() / weights.sum()
    conf_loss = F.binary_cross_entropy_with_logits(conf_z, conf_y.float())
    total = ce_loss + conf_weight * conf_loss
    parts = {"ce": ce_loss.item(), "conf": conf_loss.item(), "acc1": first.float().mean().item()}
    return total, parts
