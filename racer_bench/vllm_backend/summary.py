"""Summary of a vLLM-backend run: the native summary once per batch size."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from racer_bench.analysis import metrics as M
from racer_bench.analysis.summary import summarize

Record = dict[str, Any]


def summarize_batches(records: Sequence[Record], metric: str | None, depth: int) -> dict[str, Any]:
    """The smallest batch size's summary at the top, every batch size's under ``by_batch``.

    Each block adds ``acceptance_at_least`` (per-position acceptance up to ``depth``).
    """
    groups: dict[int, list[Record]] = {}
    for record in records:
        groups.setdefault(int(record["batch_size"]), []).append(record)
    blocks = {
        b: summarize(rs, metric, has_baseline=True)
        | {"acceptance_at_least": M.acceptance_at_least(rs, "method", depth)}
        for b, rs in sorted(groups.items())
    }
    if not blocks:
        return {"n_failed": 0, "by_batch": {}}
    top = dict(blocks[min(blocks)])
    top["by_batch"] = {str(b): block for b, block in blocks.items()}
    return top
