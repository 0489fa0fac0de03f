"""The vLLM table and figure from run folders (synthetic records, no model)."""

from __future__ import annotations

import json

from racer_bench.analysis.batches import (
    acceptance_table,
    ar_agreement,
    load_runs,
    plot_speedups,
    speed_table,
)
from racer_bench.vllm_backend.step_records import turn_record


def block(speed: float, speedup: float, mat: float, acc: list[float]) -> dict:
    return {"tokens_per_s": speed, "speedup": speedup, "speedup_ci95": [speedup - 0.1, speedup],
            "mat": mat, "baseline_tokens_per_s": speed / speedup, "new_tokens": 100,
            "identical": 1.0, "n_prompts": 2, "acceptance_at_least": acc}  # fmt: skip


def write_run(path, manifest, summary, records=()):
    path.mkdir(parents=True)
    (path / "manifest.json").write_text(json.dumps(manifest))
    (path / "summary.json").write_text(json.dumps(summary))
    (path / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_table_rows_per_method_and_native_batch_one_beside(tmp_path):
    by_batch = {"1": block(20.0, 2.0, 2.5, [0.5, 0.25]), "4": block(60.0, 1.5, 2.5, [0.5, 0.25])}
    write_run(tmp_path / "v_pld", {"method": "pld"}, {"label": "pld (chain)", "by_batch": by_batch})
    steps = [{"n_draft": 3, "n_accepted": 2}, {"n_draft": 3, "n_accepted": 0}]
    record = {"status": "ok", "method": {"turns": [turn_record([1] * 5, "", 1.0, "eos", steps)]}}
    native = block(30.0, 1.8, 2.1, [])
    write_run(tmp_path / "n_pld", {"method": "pld"}, native, [record])
    write_run(tmp_path / "n_other", {"method": "rest"}, native)  # no vLLM run: not shown
    rows = load_runs([tmp_path / "v_pld"], [tmp_path / "n_pld", tmp_path / "n_other"])
    assert [r.method for r in rows] == ["pld"]
    table = speed_table(rows)
    assert "| pld (chain) | 20.0 · **2.00x** [1.90, 2.00] · 2.50 | 60.0 · **1.50x**" in table
    assert "30.0 · **1.80x**" in table  # the native column
    assert "| vLLM AR (no speculation) | 10.0 | 40.0 | 16.7 |" in table
    acceptance = acceptance_table(rows, 2)
    assert "| pld (chain) | native | 0.50 | 0.50 |" in acceptance  # from the native records
    assert plot_speedups(rows, tmp_path / "fig.png").stat().st_size > 1000


def test_ar_agreement_pairs_vllm_batch_one_with_native_by_prompt(tmp_path):
    def rec(tokens, **extra):
        return {"status": "ok", "baseline": {"turns": [{"tokens": tokens}]}, **extra}

    vllm = [rec([1, 2], id="a@b1", prompt_id="a", batch_size=1),
            rec([1, 3], id="b@b1", prompt_id="b", batch_size=1),
            rec([9], id="a@b4", prompt_id="a", batch_size=4)]  # fmt: skip
    native = [rec([1, 2], id="a"), rec([1, 2], id="b")]
    write_run(tmp_path / "v", {}, {}, vllm)
    write_run(tmp_path / "n", {}, {}, native)
    assert ar_agreement(tmp_path / "v", tmp_path / "n") == (1, 2)
