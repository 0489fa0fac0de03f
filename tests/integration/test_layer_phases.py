"""The layer-phase profiler: a counters build of the kernels runs a tiny model's steps, gives
every phase of the layer stack its time, and leaves the logits as the plain build does."""

from __future__ import annotations

import pytest
import torch

from racer_bench.bench import profile_layer_phases as layer_phases
from racer_bench.bench.bench_forward_cost import draft_of
from racer_bench.engine.fast import kernel_library
from racer_bench.models.loaders import tiny_random

pytestmark = pytest.mark.skipif(
    kernel_library.unavailable_reason() is not None,
    reason=f"kernels unavailable: {kernel_library.unavailable_reason()}",
)
PREFIX = list(b"a prefix of some forty bytes for the tiny model")


@pytest.fixture(scope="module")
def phase_lib(tmp_path_factory):
    return layer_phases.build_phase_library(tmp_path_factory.mktemp("phases"))


def fast_tiny():
    target = tiny_random(dtype="bfloat16", num_kv_heads=2)
    target.set_engine("fast")
    assert target.layer_stack is not None
    return target


def test_every_phase_and_the_part_outside_the_layers_get_time(phase_lib) -> None:
    target = fast_tiny()
    target.prefill(PREFIX[:-1])
    shares = layer_phases.profile_step(phase_lib, target, PREFIX[-1], tokens=4, reps=5)
    assert set(shares) == {*layer_phases.PHASES, layer_phases.OUTSIDE}
    assert all(shares[phase] > 0 for phase in layer_phases.PHASES)
    assert shares[layer_phases.OUTSIDE] > 0  # the LM head and the loop run outside the layers


def test_the_counters_build_gives_the_plain_build_s_logits(phase_lib) -> None:
    target = fast_tiny()
    target.prefill(PREFIX[:-1])
    draft = draft_of("tree", 6, PREFIX[-1])
    past = target.length
    plain = target.forward_tree(PREFIX[-1], draft).logits
    target.commit(past, [])
    target.prefill(PREFIX[:-1])
    with kernel_library.swapped_library(phase_lib):
        counted = target.forward_tree(PREFIX[-1], draft).logits
    assert torch.equal(plain, counted)


def test_the_table_has_a_row_per_phase_and_a_column_per_cell() -> None:
    cell = dict.fromkeys((*layer_phases.PHASES, layer_phases.OUTSIDE), 10.0)
    text = layer_phases.table({(200, 1): cell, (600, 16): cell})
    lines = text.splitlines()
    assert len(lines) == 2 + len(layer_phases.PHASES) + 1 + 1
    assert "200 ctx, 1 tok" in lines[0] and "600 ctx, 16 tok" in lines[0]
    assert "| row attention | 10 (9%) | 10 (9%) |" in text
    assert lines[-1] == "| **step** | 0.11 ms | 0.11 ms |"
