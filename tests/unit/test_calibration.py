"""ECE and DSpark's left-to-right temperature scaling on synthetic data."""

from __future__ import annotations

import torch

from methods.common.calibration import expected_calibration_error, sequential_temperatures, survival


def test_ece_by_hand() -> None:
    probs = torch.tensor([0.05, 0.05, 0.95, 0.95])
    assert abs(expected_calibration_error(probs, torch.tensor([0, 0, 1, 1])) - 0.05) < 1e-6
    # one bin [0.5, 0.6): mean prediction 0.55, hit rate 0.25
    probs = torch.tensor([0.55] * 4)
    assert abs(expected_calibration_error(probs, torch.tensor([1, 0, 0, 0])) - 0.30) < 1e-6
    assert expected_calibration_error(torch.zeros(0), torch.zeros(0)) == 0.0


def synthetic(n: int, k: int, scale: float, seed: int):
    """Blocks whose true acceptance logit is z / scale: the raw logits are overconfident."""
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(n, k, generator=gen) * 3 + 1.0
    accepted = torch.rand(n, k, generator=gen) < torch.sigmoid(z / scale)
    valid = torch.ones(n, k, dtype=torch.bool)
    valid[: n // 5, k - 1] = False  # some blocks run past the sequence end
    return z, accepted, valid


def survival_ece(z, accepted, valid, temps) -> list[float]:
    s = survival(z, temps)
    alive = accepted.long().cumprod(-1).bool()
    return [expected_calibration_error(s[valid[:, j], j], alive[valid[:, j], j])
            for j in range(z.shape[1])]  # fmt: skip


def test_sequential_temperatures_reduce_ece_on_held_out_data() -> None:
    fit = synthetic(4000, 4, scale=3.0, seed=0)
    temps = sequential_temperatures(*fit)
    assert (temps > 1.5).all()  # overconfident logits need T > 1 (true value 3)
    held = synthetic(4000, 4, scale=3.0, seed=1)
    before = survival_ece(*held, torch.ones(4))
    after = survival_ece(*held, temps)
    assert all(a < 0.5 * b for a, b in zip(after, before, strict=True)), (before, after)
    assert max(after) < 0.03


def test_calibrated_logits_keep_temperature_one() -> None:
    z, accepted, valid = synthetic(6000, 3, scale=1.0, seed=2)
    temps = sequential_temperatures(z, accepted, valid)
    assert ((temps > 0.7) & (temps < 1.45)).all(), temps


def test_scaling_keeps_the_order_of_predictions() -> None:
    """Calibration is monotone: a higher logit keeps a higher confidence at every position."""
    z, accepted, valid = synthetic(2000, 3, scale=2.0, seed=3)
    temps = sequential_temperatures(z, accepted, valid)
    for j in range(3):
        order = z[:, j].argsort()
        conf = torch.sigmoid(z[:, j] / temps[j])[order]
        assert (conf[1:] >= conf[:-1]).all()
    s = survival(z, temps)
    assert (s[:, 1:] <= s[:, :-1] + 1e-7).all()  # survival never grows along the block
