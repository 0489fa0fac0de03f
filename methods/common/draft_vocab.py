"""The draft vocabulary of a trained head: the most frequent tokens of its training data."""

from __future__ import annotations

import torch


def frequent_tokens(sequences: list[list[int]], size: int, vocab_size: int) -> torch.Tensor:
    """The ``size`` most frequent token ids (ascending id order): a draft vocabulary."""
    counts = torch.zeros(vocab_size, dtype=torch.long)
    for seq in sequences:
        counts += torch.bincount(torch.tensor(seq, dtype=torch.long), minlength=vocab_size)
    size = min(size, vocab_size)
    order = torch.argsort(-counts * vocab_size + torch.arange(vocab_size))  # ties: lower id
    return order[:size].sort().values


def draft_labels(ids: torch.Tensor, draft_ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Target ids LongTensor[T] -> draft-vocabulary labels (-100 where not in it)."""
    lookup = torch.full((vocab_size,), -100, dtype=torch.long)
    lookup[draft_ids] = torch.arange(len(draft_ids))
    return lookup[ids]
