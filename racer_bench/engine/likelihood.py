"""Teacher-forced log-probabilities of generated outputs under the target.

One forward over context + output per distinct (context, output) pair, without the KV cache of
the decode loop (which stays as it is); pairs of equal total length share a batched forward
(no padding, so no mask can change a result). Equal pairs are computed once, so two equal
outputs get exactly the same value and their gap is exactly 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from racer_bench.engine.target import HFTarget

Pair = tuple[tuple[int, ...], tuple[int, ...]]
MAX_BATCH = 4


@torch.inference_mode()
def output_logprobs(
    target: HFTarget, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]
) -> list[float]:
    """Summed log-probability of each output given its context: ``[(context, output), ...]``.

    An empty output sums to 0.0; the context must hold at least one token.
    """
    unique: dict[Pair, float] = {(tuple(c), tuple(o)): 0.0 for c, o in pairs}
    by_length: dict[int, list[Pair]] = {}
    for pair in unique:
        if pair[1]:
            by_length.setdefault(len(pair[0]) + len(pair[1]), []).append(pair)
    for group in by_length.values():
        for start in range(0, len(group), MAX_BATCH):
            chunk = group[start : start + MAX_BATCH]
            for pair, value in zip(chunk, _batch_logprobs(target, chunk), strict=True):
                unique[pair] = value
    return [unique[(tuple(c), tuple(o))] for c, o in pairs]


def _batch_logprobs(target: HFTarget, chunk: Sequence[Pair]) -> list[float]:
    """Summed output log-probabilities of pairs of one total length, in one forward."""
    ids = torch.tensor([[*c, *o] for c, o in chunk], dtype=torch.long, device=target.device)
    hidden = target.body(input_ids=ids, use_cache=False).last_hidden_state
    out = []
    for row, (context, output) in enumerate(chunk):
        start = len(context) - 1  # the position whose logits predict the first output token
        logits = target.logits(hidden[row, start : start + len(output)])
        logp = torch.log_softmax(logits, dim=-1)
        tokens = torch.tensor(output, dtype=torch.long, device=logp.device)
        out.append(float(logp.gather(1, tokens[:, None]).sum()))
    return out
