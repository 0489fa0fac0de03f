"""DSpark: a semi-autoregressive block drafter with a Markov head and a calibrated confidence.

Paper: Cheng, Yu, Shao, Li, Xiong, Qian, Zhu et al. (Peking University and DeepSeek-AI),
"DSpark: Confidence-Scheduled Speculative Decoding with Semi-Autoregressive Generation" (2026).
No reference code was available; this follows the paper's description (reference notes 9b).

Followed from the paper:

* a **parallel backbone** (DFlash-style block drafter) gives base logits ``U_k`` for all ``g``
  positions of a block in one pass, conditioned on the target's context features;
* a **Markov head** adds a prefix-dependent bias before each token is chosen,
  ``p_k(v) ~ exp(U_k(v) + B_k(x_{k-1}, v))``, a gated low-rank transition bias from the previous
  drafted token, so drafted tokens depend on each other again; the backbone runs once per
  block, the Markov head once per drafted node;
* a **confidence head** ``c_k = sigmoid(w . [h_k; W1 e[x_{k-1}]])`` predicts each position's
  conditional acceptance, calibrated left to right by temperature scaling against the expected
  calibration error of the prefix survival (:mod:`methods.common.calibration`, fitted on held-out
  distillation data by ``scripts/train_drafter.py kind=dspark``);
* verification is unchanged and lossless: point-mass drafts under greedy, and with
  ``temperature > 0`` each token is sampled from ``softmax(logits / temperature)`` and that row
  is returned as ``q`` for lossless speculative sampling.

Scaled down for a CPU (and our own design where the paper gives no detail):

* the backbone is one small layer (two before version 3; ``head.block_layers``) on the
  target's fused low/mid/high features (EAGLE-3's ``fc``) instead of a multi-layer DFlash
  model; block size 4 (training default; drafting caps 6) instead of 16; Markov rank 128
  (paper ~256) over a draft vocabulary of the most frequent distillation tokens; every block
  row also reads the context vector of the last committed position (an EAGLE-like shortcut
  that makes the first position easy to learn from little data); the rows attend to each
  other bidirectionally as in DFlash, or causally (``head.block_causal``: row k reads rows
  0..k, which lets training add one-row blocks for the first position);
* a fresh head starts as the identity on the target's last feature layer (``head.init`` =
  ``pass_last``, Medusa's zero-initialised-residual idea; :func:`methods.dspark.head.
  pass_last_feature`), which gave more accepted tokens per step than a random ``fc`` in the
  same training minutes (docs/model_drafters.md);
* the confidence head trains beside the drafter on detached states (BCE on the teacher-forced
  argmax matching the target's token); the temperatures are fitted once, after training,
  on held-out sequences (grid 0.1..10 per position);
* instead of the hardware-aware prefix scheduler the drafter builds a small **tree**: an
  EAGLE-2-style best-first expansion in which every node's children come from the same block
  row ``U_k`` plus the Markov bias of that node's token (cheap: no backbone call per node), and
  nodes are ranked by predicted survival ``S = prod c`` rather than by draft log-probability.
  A node's own predicted conditional acceptance is ``c`` for the argmax child and
  ``(1 - c) p(v) / (1 - p(argmax))`` for an alternative ``v`` (:func:`acceptance_scores`);
  it is ``Draft.score`` (what the confidence scheduler buckets), and the sum of the nodes'
  survivals is reported per step as ``predicted_accepted``;
* sampling mode drafts ``topk`` i.i.d. samples at depth 1, each continued as a sampled chain;
  scores there still describe greedy acceptance (a feature, not a probability, under sampling);
* ``checkpoint: null`` builds a random head (tests only; lossless since verification is exact).
"""

from __future__ import annotations

from typing import ClassVar

import torch

from methods.common.draft_tree import grow_scored_tree, tree_draft
from methods.common.heads.checkpoint import load_checkpoint
from methods.common.heads.drafter import HeadDrafter, on_feature_device
from methods.dspark.head import KV, DSparkHead, acceptance_scores, dspark_config
from racer_bench.config.run import Engine
from racer_bench.config.schema import NonNegativeFloat, NonNegativeInt, PositiveInt, Seed
from racer_bench.engine.structs import Draft, DraftContext, Source


def load_dspark(path: str) -> DSparkHead:
    """A DSpark head trained by ``scripts/train_drafter.py kind=dspark``."""
    data = load_checkpoint(path, "dspark")
    head = DSparkHead(data["config"], data["state"]["draft_ids"])
    head.load_state_dict(data["state"])
    return head.eval()


class DSparkDrafter(HeadDrafter):
    """Block backbone + Markov head drafting a survival-ranked tree, scored per node."""

    name: ClassVar[str] = "dspark"
    # 2: normed block inputs (checkpoints of 1 still load); 3: causal and concat-input heads
    version: ClassVar[str] = "3"
    head: DSparkHead | None

    def __init__(
        self,
        vocab_size: int,
        checkpoint: str | None = None,
        feature_layers: list[NonNegativeInt] | None = None,
        block_size: PositiveInt = 6,
        topk: PositiveInt = 2,
        total_tokens: PositiveInt = 12,
        temperature: NonNegativeFloat = 0.0,
        calibrated: bool = True,
        seed: Seed = 0,
        engine: Engine = "auto",
    ) -> None:
        self.block_size, self.topk, self.capacity = block_size, topk, total_tokens
        self.temperature, self.calibrated = float(temperature), calibrated
        super().__init__(vocab_size, checkpoint, feature_layers, seed, engine)
        if self.head is not None:
            self.block_size = min(block_size, self.head.block_size)

    def _load_head(self, checkpoint: str) -> DSparkHead:
        return load_dspark(checkpoint)

    def _random_head(self, feature_size: int) -> DSparkHead:
        hidden = feature_size // len(self.needs.hidden_layers)
        cfg = dspark_config(hidden, feature_size, self.vocab_size, block_size=self.block_size,
                            num_layers=1, num_heads=4, markov_rank=16)  # fmt: skip
        torch.manual_seed(self.seed)
        head = DSparkHead(cfg, torch.arange(self.vocab_size))
        torch.nn.init.normal_(head.markov_out.weight, std=0.5)  # exercise the Markov path
        return head

    def _reset_state(self) -> None:
        self._ctx: KV | None = None  # per layer context keys/values of committed positions
        self._past = 0  # committed positions in the context (all tokens but the root)
        self._last: torch.Tensor | None = None  # context vector of the last one [H]
        self.rng = torch.Generator().manual_seed(self.seed)

    @on_feature_device
    @torch.inference_mode()
    def propose(self, ctx: DraftContext) -> Draft:
        self._catch_up(ctx)
        depth = min(self.block_size, ctx.max_depth)
        budget = min(self.capacity, ctx.budget)
        if self._ctx is None or depth < 1 or budget < 1:
            return Draft.empty()
        head = self.head
        assert head is not None
        assert self._last is not None
        states = head.draft_block(ctx.root, self._last, self._ctx, self._past, depth)
        rows = _BlockRows(head, states, self.calibrated)
        if self.temperature > 0:
            return self._sampled_tree(rows, ctx.root, depth, budget)
        tokens, parents, local = grow_scored_tree(
            rows.log_scores([ctx.root], 0)[0], rows.expand, depth, self.topk, budget
        )
        draft = tree_draft(tokens, parents, head.draft_ids)
        draft.score = torch.tensor(local, dtype=torch.float32).exp()
        draft.score_is_probability = True  # the calibrated confidence of each position
        draft.meta["predicted_accepted"] = float(_survival(draft.score, parents).sum())
        return draft

    def _consume(self, feats: torch.Tensor, tokens: list[int]) -> None:
        """Append the context keys/values of committed positions ``past .. past + n - 1``."""
        head = self.head
        assert head is not None
        pos = torch.arange(self._past, self._past + len(feats))
        c, kv = head.context(feats.to(head.fc.weight.dtype), pos)
        self._last = c[-1]
        if self._ctx is not None:
            kv = [(torch.cat([k0, k]), torch.cat([v0, v]))
                  for (k0, v0), (k, v) in zip(self._ctx, kv, strict=True)]  # fmt: skip
        self._ctx = kv
        self._past += len(feats)

    def _sampled_tree(self, rows: _BlockRows, root: int, depth: int, budget: int) -> Draft:
        """``topk`` i.i.d. depth-1 samples, each continued as a sampled chain, with ``q``."""
        head = rows.head
        tokens: list[int] = []  # target ids
        parents: list[int] = []
        q_rows: list[torch.Tensor] = []
        scores: list[float] = []
        level = [(-1, root)]  # (parent node, parent token) to extend
        for d in range(depth):
            logits, conf = rows.logits([t for _, t in level], d)
            q = torch.softmax(logits.double() / self.temperature, -1)
            accept = acceptance_scores(logits, conf)
            draws = self.topk if d == 0 else 1
            nxt = []
            for i, (parent, _) in enumerate(level):
                picks = torch.multinomial(q[i], draws, replacement=True, generator=self.rng)
                for j in picks.tolist():
                    if len(tokens) >= budget:
                        break
                    nxt.append((len(tokens), int(head.draft_ids[j])))
                    tokens.append(int(head.draft_ids[j]))
                    parents.append(parent)
                    q_rows.append(self._full_row(q[i]))
                    scores.append(float(accept[i, j]))
            level = nxt
        return Draft(
            tokens=torch.tensor(tokens, dtype=torch.long),
            parents=torch.tensor(parents, dtype=torch.long),
            source=torch.full((len(tokens),), int(Source.MODEL), dtype=torch.int32),
            q=torch.stack(q_rows).float() if q_rows else None,
            score=torch.tensor(scores, dtype=torch.float32),
            score_is_probability=True,
        )

    def _full_row(self, q: torch.Tensor) -> torch.Tensor:
        """A draft-vocabulary distribution FloatTensor[Vd] as a target-vocabulary row [V]."""
        head = self.head
        assert head is not None
        row = torch.zeros(self.vocab_size, dtype=q.dtype)
        return row.index_copy(0, head.draft_ids, q)


class _BlockRows:
    """One block's states; Markov-biased logits and acceptance scores per tree node."""

    def __init__(self, head: DSparkHead, states: torch.Tensor, calibrated: bool) -> None:
        self.head, self.states = head, states  # [g, H]
        self.base = head.base_logits(states)  # [g, Vd], once per block
        self.temps = head.conf_temperature if calibrated else torch.ones_like(head.conf_temperature)

    def logits(self, prev: list[int], row: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Biased logits FloatTensor[N, Vd] and calibrated confidence FloatTensor[N] of block
        row ``row`` after previous target tokens ``prev``."""
        h = self.states[row].expand(len(prev), -1)
        bias, m = self.head.markov(torch.tensor(prev), h)
        logits = self.base[row] + bias
        conf = torch.sigmoid(self.head.confidence_logit(h, m) / self.temps[row])
        return logits, conf

    def log_scores(self, prev: list[int], row: int) -> torch.Tensor:
        logits, conf = self.logits(prev, row)
        return acceptance_scores(logits, conf).clamp_min(1e-30).log()

    def expand(
        self, frontier: list[int], d: int, tokens: list[int], parents: list[int]
    ) -> torch.Tensor:
        """Log acceptance scores FloatTensor[F, Vd] of the children of ``frontier`` (depth d)."""
        prev = self.head.draft_ids[torch.tensor([tokens[i] for i in frontier])].tolist()
        return self.log_scores(prev, d - 1)


def _survival(score: torch.Tensor, parents: list[int]) -> torch.Tensor:
    """Predicted survival FloatTensor[N] of every node: product of scores along its path."""
    out = score.clone()
    for i, p in enumerate(parents):
        if p >= 0:
            out[i] = out[p] * score[i]
    return out
