"""REST: retrieval-based speculative decoding from a static token datastore.

Paper: He, Zhong, Cai, Lee, He, "REST: Retrieval-Based Speculative Decoding", NAACL 2024
(arXiv 2311.08252). Reference code: FasterDecoding/REST (DraftRetriever, vendored by Spec-Bench
as ``model/rest``). Behaviour followed: the query is the suffix of the context (root included)
of length ``max_token_span`` down to ``min_token_span`` (16 ... 2); the first length with any
match is used; the next ``long`` tokens after up to ``k`` matches are retrieved, every prefix of
every continuation is counted, and the ``num_draft`` most frequent prefixes form the draft tree
(a trie, source RETRIEVAL). The datastore never changes during decoding. Each node's
``Draft.score`` is its prefix's count over the number of retrieved continuations (the share
that passes through it; the confidence scheduler's feature).

Where the datastore comes from (:mod:`methods.common.datastore`):

* ``datastore``: a ``.npz`` built by ``scripts/build_datastore.py``; used as is.
* otherwise ``corpus`` + ``tokenizer``: the datastore is loaded from
  ``<cache_dir>/datastores/<tokenizer>/<corpus>-<max_tokens>.npz``, or built there on first use.
  ``corpus`` is ``stdlib`` (the Python standard library's own sources: the default, a code
  corpus present on every machine, ~3M SmolLM2 tokens) or a file/folder of text, code or
  JSON(L) (each JSON string is one document; e.g. a ShareGPT/UltraChat dump for chat tasks,
  which the user must supply). ``tokenizer`` must be the target's: ``auto`` (byte tokenizer for
  the tiny test model, else the cached model folder with the target's vocabulary size), a model
  config name (``smollm2_135m``), a tokenizer folder or a hub id.

Deviations: no match gives an empty draft (a plain autoregressive step) instead of the
reference's dummy one-token draft; continuations stop at document boundaries (see
:mod:`methods.common.datastore`); ties among equally frequent prefixes go to the shorter, then the
lexicographically smaller one, so exactly ``num_draft`` nodes are kept (the reference's heap may
keep a few more and then cuts whole paths).
"""

from __future__ import annotations

from typing import ClassVar

import torch

from methods.common.datastore import Datastore, check_vocab, load_or_build, top_prefix_counts
from racer_bench.config.paths import DEFAULT_CACHE_DIR
from racer_bench.config.schema import PositiveInt
from racer_bench.engine.drafter import DrafterNeeds
from racer_bench.engine.structs import Draft, DraftContext, Feedback, Source
from racer_bench.engine.tree import TrieBuilder


def retrieve_draft(
    store: Datastore,
    context: list[int],
    num_nodes: int,
    max_span: int,
    min_span: int,
    k: int,
    long: int,
) -> Draft:
    """REST's draft tree for ``context`` (root last): the most frequent retrieved prefixes.

    Args:
        store: the datastore.
        context: committed tokens, root last; its suffix is the query.
        num_nodes: most nodes in the tree.
        max_span, min_span: query lengths tried, longest first.
        k: most matches whose continuations are counted.
        long: continuation length (= deepest node).
    """
    meta = {"retrieval_found": 0.0, "match_span": 0.0, "n_matches": 0.0}
    if num_nodes <= 0 or long <= 0:
        return _with_meta(Draft.empty(), meta)
    span, lo, hi = store.longest_match(context, max_span, min_span)
    if span == 0:
        return _with_meta(Draft.empty(), meta)
    conts = store.continuations(lo, hi, span, k, long)
    builder = TrieBuilder(num_nodes)
    nodes: dict[tuple[int, ...], int] = {}
    for path, count in top_prefix_counts(conts, num_nodes):  # parents come first
        prefix = tuple(path)
        share = count / len(conts)  # of the retrieved continuations, those through this node
        parent = nodes.get(prefix[:-1], -1)
        nodes[prefix] = builder.add(parent, prefix[-1], Source.RETRIEVAL, score=share)
    found = float(len(builder) > 0)
    meta.update(retrieval_found=found, match_span=float(span), n_matches=float(hi - lo))
    return builder.build(meta)


def _with_meta(draft: Draft, meta: dict[str, float]) -> Draft:
    draft.meta = meta
    return draft


class RestDrafter:
    """REST: draft trees retrieved from a suffix-array datastore."""

    name: ClassVar[str] = "rest"
    version: ClassVar[str] = "1"
    needs = DrafterNeeds()

    def __init__(
        self,
        vocab_size: int,
        datastore: str | None = None,
        corpus: str = "stdlib",
        tokenizer: str = "auto",
        cache_dir: str = DEFAULT_CACHE_DIR,
        max_tokens: PositiveInt = 4_000_000,
        num_draft: PositiveInt = 64,
        max_token_span: PositiveInt = 16,
        min_token_span: PositiveInt = 2,
        long: PositiveInt = 10,
        k: PositiveInt = 5000,
    ) -> None:
        if not 1 <= min_token_span <= max_token_span:
            raise ValueError(
                f"method.min_token_span={min_token_span}, max_token_span={max_token_span}: "
                "need 1 <= min_token_span <= max_token_span"
            )
        self.num_draft = num_draft
        self.max_token_span = max_token_span
        self.min_token_span = min_token_span
        self.long = long
        self.k = k
        self.capacity = num_draft
        # Loaded (or built) here, not in reset, so the cost never lands in a timed prefill.
        if datastore is not None:
            self.store = Datastore.load(datastore)
            built = int(self.store.meta.get("vocab_size", vocab_size))
            check_vocab(built, vocab_size, f"datastore {datastore}")
        else:
            self.store = load_or_build(cache_dir, corpus, tokenizer, vocab_size, max_tokens)

    def reset(self, prompt_ids: list[int], prompt_topk: torch.Tensor | None) -> None:
        pass  # the datastore is static: nothing to learn per prompt

    def propose(self, ctx: DraftContext) -> Draft:
        return retrieve_draft(
            self.store,
            ctx.tokens,
            min(self.num_draft, ctx.budget),
            self.max_token_span,
            self.min_token_span,
            self.k,
            min(self.long, ctx.max_depth),
        )

    def update(self, fb: Feedback) -> None:
        pass
