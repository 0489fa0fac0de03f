"""Whether llama.cpp's batched eval gives the logits of one-token evals on this GGUF.

A speculative step evaluates the root and its draft in one batch, while llama.cpp's AR evaluates
one token at a time; greedy speculation returns llama.cpp's AR output only where both give the
same argmax. :func:`batch_vs_single` evaluates one sequence both ways on an engine that keeps
every position's logits and compares them; the manifest's ``lossless`` follows from it.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def batch_vs_single(llm: Any, prefix: list[int], tokens: list[int]) -> dict[str, Any]:
    """``prefix`` prefilled, then ``tokens`` in one batch and again one by one: the largest
    logit difference and whether every argmax agrees (``llm`` keeps all logits)."""
    llm.reset()
    llm.eval(prefix)
    llm.eval(tokens)  # one batch, as a speculative step evaluates its root and draft
    start = len(prefix)
    batch = np.array(llm.scores[start : start + len(tokens)], dtype=np.float32)
    llm.reset()
    llm.eval(prefix)
    single = []
    for token in tokens:
        llm.eval([token])
        single.append(np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32))
    llm.reset()
    one = np.stack(single)
    diff = float(np.abs(batch - one).max()) if len(tokens) else 0.0
    return {"positions": len(tokens), "max_abs_logit_diff": diff,
            "argmax_equal": bool((batch.argmax(1) == one.argmax(1)).all()),
            "identical": diff == 0.0}  # fmt: skip


def lossless_of(probe: dict[str, Any]) -> tuple[bool, str]:
    """The manifest's ``lossless`` and why, from :func:`batch_vs_single`."""
    if probe["identical"]:
        return True, ("a batch of tokens gave the logits of one-token evals, bit for bit "
                      f"({probe['positions']} positions)")  # fmt: skip
    return False, ("llama.cpp's batched eval gives other logits than one-token evals on this "
                   f"GGUF (max |diff| {probe['max_abs_logit_diff']:.3g} over "
                   f"{probe['positions']} positions): where the top two logits are closer than "
                   "that, a speculative output can part from llama.cpp's AR")  # fmt: skip
