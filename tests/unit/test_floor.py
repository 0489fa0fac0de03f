"""The weight-read floor: which bytes a step reads, the bandwidth cache, the summary ratio."""

from __future__ import annotations

import torch

from racer_bench.engine.fast import floor, kernel_library
from racer_bench.models.loaders import tiny_random
from racer_bench.run.runner import floor_block


def test_weight_bytes_skip_an_untied_embedding_and_count_a_tied_one_once() -> None:
    model = tiny_random(dtype="float32").model  # untied: the embedding is read a row at a time
    every = sum(p.numel() * 4 for p in model.parameters())
    embedding = model.get_input_embeddings().weight.numel() * 4
    assert floor.weight_bytes(model) == every - embedding
    model.get_output_embeddings().weight = model.get_input_embeddings().weight  # tie them
    tied = sum(p.numel() * 4 for p in model.parameters())  # parameters() lists it once
    assert floor.weight_bytes(model) == tied
    assert floor.weight_bytes(model.to(torch.bfloat16)) == tied // 2


def test_bandwidth_is_the_best_reader_measured_afresh_each_time(monkeypatch) -> None:
    calls = []
    readers = {"sum_float32": 20.0, "gemv_bfloat16": 22.5}
    monkeypatch.setattr(floor, "measure_bandwidth", lambda: calls.append(1) or readers)
    first, again = floor.bandwidth(), floor.bandwidth()
    assert calls == [1, 1]  # in the sitting of the steps it is compared with, never cached
    assert first["gbps"] == again["gbps"] == 22.5 and first["readers"] == readers
    assert first["threads"] == torch.get_num_threads()


def test_floor_record_and_the_summary_ratio(monkeypatch) -> None:
    monkeypatch.setattr(floor, "measure_bandwidth", lambda: {"sum_float32": 1.0})  # 1 ms per MB
    model = tiny_random(dtype="float32").model
    record = floor.floor_record(model)
    assert (
        floor.floor_record(model, {"gbps": 2.0, "threads": 1})["floor_ms"] == record["floor_ms"] / 2
    )
    assert record["floor_ms"] == floor.weight_bytes(model) / 1e6
    block = floor_block(record, 2 * record["floor_ms"])
    assert block["ar_step_floor_ratio"] == 2.0 and block["floor_ms"] == record["floor_ms"]
    assert floor_block(None, 3.0) == {} and floor_block(record, None) == {}


def test_a_real_bandwidth_measure_is_positive() -> None:
    readers = floor.measure_bandwidth(buffer_bytes=8 << 20, passes=2)
    assert readers["sum_float32"] > 0 and all(gbps > 0 for gbps in readers.values())
    if kernel_library.unavailable_reason() is None:  # the AR step's own reader, per dtype
        assert {"gemv_float32", "gemv_bfloat16"} <= set(readers)
