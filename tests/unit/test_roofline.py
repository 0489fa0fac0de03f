"""The roofline cells: what each kernel reads and multiplies, and its time against both roofs."""

from __future__ import annotations

import pytest
import torch

from racer_bench.bench import bench_roofline as roof

GEMMS = {"q/k/v GEMM": (8, 4), "o GEMM": (4, 4), "gate/up GEMM": (16, 4), "down GEMM": (4, 8)}
SHAPE = roof.Shape(GEMMS, layers=2, heads=2, kv_heads=1, head_dim=4, lm_head=(32, 4), itemsize=2)


def test_a_gemm_reads_its_weights_once_whatever_the_rows() -> None:
    one, sixteen = SHAPE.work("gate/up GEMM", 1, 100), SHAPE.work("gate/up GEMM", 16, 100)
    assert one[0] == sixteen[0] == 16 * 4 * 2 * 2  # N * K * bytes * layers
    assert sixteen[1] == 16 * one[1] == 16 * 16 * 4 * 2


def test_attention_reads_the_cache_and_grows_with_rows_and_context() -> None:
    nbytes, macs = SHAPE.work(roof.ATTENTION, 3, 10)
    assert nbytes == 2 * 10 * 1 * 4 * 2 * 2  # keys and values, kv heads, dim, bytes, layers
    assert macs == 2 * 3 * 2 * 10 * 4 * 2
    assert SHAPE.work(roof.ATTENTION, 3, 20)[1] == 2 * macs


def test_cells_put_each_kernel_against_its_floor_and_peak() -> None:
    phases = {(10, 1): {k: 1.0 for k in (*roof.GEMM_PHASES, roof.ATTENTION)}}
    peak = {"ours": 1e9, "torch_mm": 5e8, "torch_mm_float32": 2.5e8}
    cells = roof.cells(phases, {1: 2.0}, SHAPE, gbps=1.0, peak=peak)
    by = {c.kernel: c for c in cells}
    nbytes, macs = SHAPE.work("o GEMM", 1, 10)
    assert by["o GEMM"].x_floor == pytest.approx(1e-6 / (nbytes / 1e9))
    assert by["o GEMM"].peak_share == pytest.approx(macs / 1e-6 / 1e9)  # the better GEMM peak
    _, attention_macs = SHAPE.work(roof.ATTENTION, 1, 10)
    assert by[roof.ATTENTION].peak_share == pytest.approx(attention_macs / 1e-6 / 2.5e8)
    assert by[roof.LM_HEAD].us == 2.0
    text = roof.table(cells)
    assert "| row attention | 10 |" in text and "| o GEMM | any |" in text


def test_peaks_are_measured_rates() -> None:
    got = roof.peaks(torch.float32, rows=4, passes=2)
    assert set(got) == {"ours", "torch_mm", "torch_mm_float32"}
    assert all(v > 0 for v in got.values())
