"""What a lossy verifier changes, measured against strict greedy on the same prompt.

Pure functions over prompt records (``records.py`` schema) that need no model able to solve
the task; the ones that need the target (the teacher-forced log-probabilities) or the sandbox
(HumanEval behaviour) read values the runner stored in the record:

* **answer agreement**: ``record["agreement"]`` is 1.0 when the method's extracted final answer
  equals strict greedy's (the task decides what "equal" means: :meth:`Task.agreement`), 0.0
  when not, absent or None where the task has no answer to compare;
* **target log-likelihood gap**: mean per-token log-probability of the method's output under
  the target (``turn["target_logprob"]``: the summed log-probability of the turn's tokens,
  teacher-forced) minus the same of strict greedy's output; 0 exactly when the outputs are the
  same tokens, negative when the lossy verifier wrote text the target finds less likely;
* **first divergence**: where the first token that differs from strict greedy sits, as a share
  of the method's output (1.0 = no token differs);
* **output statistics** (:func:`output_stats`): mean length, how many outputs stopped before
  the token limit and the mean share of repeated 4-grams, of either side: a positive
  log-likelihood gap can mean the lossy verifier pushed a small model into a loop.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

Record = dict[str, Any]
LOGPROB_KEY = "target_logprob"


def output_tokens(record: Record, mode: str) -> list[int]:
    """The tokens ``mode`` generated for one prompt, every turn concatenated."""
    return [tok for t in (record.get(mode) or {}).get("turns", []) for tok in t["tokens"]]


def stopped_early(record: Record, mode: str) -> bool:
    """Whether the last turn of ``mode`` ended before the token limit."""
    return record[mode]["turns"][-1].get("stop_reason") != "length"


def output_stats(records: Sequence[Record], mode: str, base: str = "strict") -> dict[str, float]:
    """``length`` (mean tokens), ``stopped`` (outputs ended before the limit) and ``repeat4``
    (mean repeated 4-gram share) of ``mode`` over the finished prompts that have ``base``."""
    done = [r for r in records if r.get("status") == "ok" and base in r and mode in r]
    if not done:
        return {"length": math.nan, "stopped": 0, "repeat4": math.nan}
    outputs = [output_tokens(r, mode) for r in done]
    return {
        "length": sum(len(o) for o in outputs) / len(done),
        "stopped": sum(stopped_early(r, mode) for r in done),
        "repeat4": sum(repeated_ngram_share(o) for o in outputs) / len(done),
    }


def first_divergence(tokens: Sequence[int], reference: Sequence[int]) -> float:
    """Index of the first position where ``tokens`` and ``reference`` differ, over len(tokens).

    1.0 when they are equal; when one is a prefix of the other, the shorter one's length is the
    first differing position (one stopped, the other went on). An empty output that differs
    from a non-empty reference diverges at 0.
    """
    if list(tokens) == list(reference):
        return 1.0
    common = min(len(tokens), len(reference))
    first = next((i for i in range(common) if tokens[i] != reference[i]), common)
    return min(1.0, first / len(tokens)) if tokens else 0.0


def repeated_ngram_share(tokens: Sequence[int], n: int = 4) -> float:
    """Share of the output's ``n``-grams that repeat an earlier one (0 = none repeats).

    A degenerate loop scores near 1; it is also very likely under the target, so a lossy run
    with a *positive* log-likelihood gap is read beside this share (docs/asd.md).
    """
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return 1.0 - len(set(grams)) / len(grams) if grams else 0.0


def record_first_divergence(record: Record, mode: str = "method", base: str = "strict") -> float:
    """:func:`first_divergence` of one prompt's outputs (all turns concatenated)."""
    return first_divergence(output_tokens(record, mode), output_tokens(record, base))


def mean_logprob(record: Record, mode: str) -> float:
    """Mean per-token target log-probability of ``mode``'s output (NaN when not measured)."""
    turns = (record.get(mode) or {}).get("turns", [])
    if not turns or any(t.get(LOGPROB_KEY) is None for t in turns):
        return math.nan
    n = sum(len(t["tokens"]) for t in turns)
    return sum(t[LOGPROB_KEY] for t in turns) / n if n else math.nan


def logprob_gap(record: Record, mode: str = "method", base: str = "strict") -> float:
    """Mean per-token log-probability of ``mode``'s output minus ``base``'s (NaN if missing)."""
    return mean_logprob(record, mode) - mean_logprob(record, base)


def agreement(record: Record) -> float:
    """1.0 / 0.0: the method's final answer equals strict greedy's; NaN where not measured."""
    value = record.get("agreement")
    return math.nan if value is None else float(value)


def measured(values: Sequence[float]) -> list[float]:
    """The values that are not NaN (prompts where the measure exists)."""
    return [float(v) for v in values if not math.isnan(v)]
