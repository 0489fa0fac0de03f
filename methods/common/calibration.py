"""Calibration of per-position acceptance predictions (DSpark's confidence head).

Pure functions on tensors, no model:

* :func:`expected_calibration_error` -- ECE of probabilities against 0/1 outcomes (equal-width
  bins, weighted by bin size).
* :func:`sequential_temperatures` -- DSpark's left-to-right temperature scaling: position
  ``k``'s temperature is the grid value that minimises the ECE of the predicted prefix survival
  ``S_k = prod_{j<=k} sigmoid(z_j / T_j)`` against the observed survival (all of positions
  ``1..k`` accepted), with ``T_1..T_{k-1}`` already fixed.
"""

from __future__ import annotations

import torch

DEFAULT_GRID = torch.logspace(-1.0, 1.0, 61)  # temperatures 0.1 .. 10


def expected_calibration_error(
    probs: torch.Tensor, outcomes: torch.Tensor, bins: int = 10
) -> float:
    """ECE of FloatTensor[N] probabilities against BoolTensor/FloatTensor[N] outcomes."""
    if probs.numel() == 0:
        return 0.0
    p = probs.double().clamp(0.0, 1.0)
    y = outcomes.double()
    index = (p * bins).long().clamp_max(bins - 1)
    conf = torch.bincount(index, weights=p, minlength=bins)
    hits = torch.bincount(index, weights=y, minlength=bins)
    return float((conf - hits).abs().sum() / len(p))


def survival(logits: torch.Tensor, temperatures: torch.Tensor) -> torch.Tensor:
    """Predicted prefix survival FloatTensor[N, K] of confidence logits FloatTensor[N, K]."""
    return torch.sigmoid(logits / temperatures).cumprod(dim=-1)


def sequential_temperatures(
    logits: torch.Tensor,
    accepted: torch.Tensor,
    valid: torch.Tensor,
    grid: torch.Tensor = DEFAULT_GRID,
    bins: int = 10,
) -> torch.Tensor:
    """Per-position temperatures FloatTensor[K], fitted left to right against the ECE of S_k.

    Args:
        logits: FloatTensor[N, K] confidence logits of N drafted blocks of K positions.
        accepted: BoolTensor[N, K] whether position k's drafted token was accepted (given the
            true prefix, i.e. its conditional acceptance).
        valid: BoolTensor[N, K] positions that exist (the block may run past the sequence end).
        grid: candidate temperatures; ties go to the one closest to 1 (log scale).
    """
    logits, accepted = logits.double(), accepted.bool()
    n, k = logits.shape
    temps = torch.ones(k, dtype=torch.float64)
    prefix = torch.ones(n, dtype=torch.float64)  # S_{k-1} with the temperatures fixed so far
    alive = torch.ones(n, dtype=torch.bool)  # observed survival of positions 1..k-1
    order = sorted(grid.double().tolist(), key=lambda t: abs(torch.tensor(t).log().item()))
    for j in range(k):
        rows = valid[:, j]
        outcome = (alive & accepted[:, j])[rows]
        best, best_ece = 1.0, float("inf")
        for t in order:  # closest to 1 first, so a strict improvement is needed to move away
            pred = prefix[rows] * torch.sigmoid(logits[rows, j] / t)
            ece = expected_calibration_error(pred, outcome, bins)
            if ece < best_ece - 1e-12:
                best, best_ece = t, ece
        temps[j] = best
        prefix = prefix * torch.sigmoid(logits[:, j] / best)
        alive = alive & accepted[:, j]
    return temps.float()
