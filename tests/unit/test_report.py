"""``reference=generate`` outside a run: its summary block, the printed table (generate()'s
tok/s appears exactly where the run measured it) and the vLLM backend's refusal."""

from __future__ import annotations

import pytest
from rich.console import Console

from racer_bench.analysis.report import setting_lines, summary_table
from racer_bench.analysis.summary import reference_block
from racer_bench.errors import ConfigError
from racer_bench.vllm_backend.engines import validate_choices


def rendered(summary: dict) -> str:
    console = Console(record=True, width=200)
    console.print(summary_table(summary))
    return console.export_text()


def turn(tokens: list[int], seconds: float) -> dict:
    return {"tokens": tokens, "prefill_time": 0.0, "decode_time": seconds, "steps": {}}


def test_reference_block_times_generate_and_compares_it_with_ar():
    records = [
        {"baseline": {"turns": [turn([1, 2, 3, 4], 1.0)]},
         "reference": {"turns": [{"tokens": [1, 2, 3, 4], "wall_time": 0.5}]}},
        {"baseline": {"turns": [turn([5, 6], 1.0)]},
         "reference": {"turns": [{"tokens": [5, 7], "wall_time": 1.5}]}},
    ]  # fmt: skip
    block = reference_block(records)
    assert block["reference_tokens_per_s"] == 6 / 2.0  # token-weighted: 6 tokens in 2 s
    assert block["reference_identical"] == 0.5
    assert reference_block([{"baseline": records[0]["baseline"]}]) == {}


def test_table_shows_generate_tok_s_only_where_it_was_measured():
    summary = {"n_prompts": 2, "n_failed": 0, "baseline_tokens_per_s": 20.0,
               "tokens_per_s": 30.0, "speedup": 1.5, "identical": 1.0}  # fmt: skip
    assert "generate()" not in rendered(summary)
    measured = summary | {"reference_tokens_per_s": 21.25, "reference_identical": 1.0}
    text = rendered(measured)
    assert "generate() tok/s" in text and "21.25" in text and "1.50x" in text
    assert any("on 2/2" in line for line in setting_lines(measured))


def test_vllm_backend_refuses_a_generate_reference_in_one_line(compose_cfg):
    cfg = compose_cfg("backend=vllm", "reference=generate")
    with pytest.raises(ConfigError, match=r"^reference=generate: runs beside our own loop only"):
        validate_choices(cfg, {"verifier": "greedy"})
