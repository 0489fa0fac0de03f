"""ASD grid with a shared strict run: one run folder per point, each a valid paired run."""

from __future__ import annotations

from pathlib import Path

import pytest

from racer_bench.analysis import frames
from racer_bench.errors import ConfigError
from racer_bench.record import folder as records
from racer_bench.run.grid import run_grid

BASE = ["debug=cpu_tiny", "task=tiny", "task.limit=3", "method=pld", "max_new_tokens=16"]
STRICT_POINT = ["verifier=asd", "verifier.budget=0", "verifier.gate=0.5", "verifier.cap=1"]
LOOSE_POINT = ["verifier=asd", "verifier.budget=50", "verifier.gate=100", "verifier.cap=4"]


@pytest.fixture(scope="module")
def grid_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("grid")
    summaries = run_grid(BASE, [STRICT_POINT, LOOSE_POINT], out)
    return out, summaries


def test_one_run_folder_per_point_sharing_strict(grid_dir):
    out, summaries = grid_dir
    assert len(summaries) == 2
    first, second = (records.load_prompts(out / str(i)) for i in range(2))
    assert [r["id"] for r in first] == [r["id"] for r in second]
    assert all(a["strict"] == b["strict"] for a, b in zip(first, second, strict=True))
    assert all(r["status"] == "ok" for r in first + second)


def test_budget_zero_point_equals_strict(grid_dir):
    _, summaries = grid_dir
    assert summaries[0]["divergence"] == 0.0
    assert summaries[0]["exceptions_per_prompt"] == 0.0
    assert summaries[0]["strict_nonempty"] == summaries[0]["nonempty"]
    assert summaries[0]["decode_gain_vs_strict"] > -1.0


def test_loose_point_takes_exceptions_and_is_labelled(grid_dir):
    out, summaries = grid_dir
    assert summaries[1]["exceptions_per_prompt"] > 0  # random model: mismatches everywhere
    run = frames.load_run(out / "1")
    assert "verifier.budget=50" in frames.hydra_overrides(run)
    assert run.manifest["config"]["verifier"]["budget"] == 50


def test_resume_does_not_redo_finished_prompts(grid_dir):
    out, _ = grid_dir
    before = [len(records.load_prompts(out / str(i))) for i in range(2)]
    run_grid(BASE, [STRICT_POINT, LOOSE_POINT], out)
    assert [len(records.load_prompts(out / str(i))) for i in range(2)] == before


def test_no_points_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="points"):
        run_grid(BASE, [], tmp_path)


def test_a_grid_with_other_settings_is_refused_in_the_same_folder(grid_dir):
    out, _ = grid_dir
    before = [(out / str(i) / "prompts.jsonl").read_bytes() for i in range(2)]
    with pytest.raises(ConfigError, match=r"holds a grid point run with other max_new_tokens"):
        run_grid([*BASE, "max_new_tokens=8"], [STRICT_POINT, LOOSE_POINT], out)
    assert [(out / str(i) / "prompts.jsonl").read_bytes() for i in range(2)] == before


def test_budget_zero_point_agrees_exactly(grid_dir):
    _, summaries = grid_dir
    strict = summaries[0]
    assert strict["agreement"] == 1.0 and strict["agreement_ci95"] == [1.0, 1.0]
    assert strict["logprob_gap"] == 0.0 and strict["logprob_gap_ci95"] == [0.0, 0.0]
    assert strict["logprob_gap_quantiles"]["p0"] == strict["logprob_gap_quantiles"]["p100"] == 0
    assert strict["first_divergence"] == 1.0
    assert strict["agreement_n"] == strict["logprob_gap_n"] == 3


def test_loose_point_loses_target_likelihood(grid_dir):
    out, summaries = grid_dir
    loose = summaries[1]
    assert loose["logprob_gap"] < 0  # accepted mismatches are tokens the target ranked lower
    low, high = loose["logprob_gap_ci95"]
    assert low <= loose["logprob_gap"] <= high
    assert loose["method_logprob"] < loose["strict_logprob"]
    assert 0 <= loose["first_divergence"] < 1 and 0 <= loose["agreement"] <= 1
    for record in records.load_prompts(out / "1"):  # per-prompt values, so summaries can be redone
        assert record["agreement"] in (0.0, 1.0)
        assert all("target_logprob" in t for m in ("method", "strict") for t in record[m]["turns"])


def test_add_quality_restores_the_measures_of_an_older_run(grid_dir, tmp_path):
    """scripts/add_quality.py gives a run recorded before the measures what the grid gives."""
    import json
    import shutil

    from tests.scripts import load_script

    out, summaries = grid_dir
    old = tmp_path / "old"
    shutil.copytree(out / "1", old)
    stripped = []
    for record in records.load_prompts(old):
        record.pop("agreement", None)
        for mode in ("method", "strict"):
            for turn in record[mode]["turns"]:
                turn.pop("target_logprob")
        stripped.append(json.dumps(record) + "\n")
    (old / "prompts.jsonl").write_text("".join(stripped))
    summary = json.loads((old / "summary.json").read_text())
    for key in ("logprob_gap", "logprob_gap_ci95", "agreement"):
        summary.pop(key)
    (old / "summary.json").write_text(json.dumps(summary))

    add_quality = load_script("add_quality")
    assert add_quality.main([str(old)]) == 0
    restored = json.loads((old / "summary.json").read_text())
    assert restored["logprob_gap"] == pytest.approx(summaries[1]["logprob_gap"], abs=1e-4)
    assert restored["agreement"] == summaries[1]["agreement"]
    assert add_quality.add_quality(old) == 0  # measured prompts are not measured again
    assert add_quality.main([str(tmp_path / "nothing")]) == 2


def test_add_quality_reads_a_curated_run_with_todays_folders(tmp_path, monkeypatch):
    """Curated manifests hold ``<data_dir>`` and ``~``: the re-measure uses today's folders."""
    import json

    from tests.scripts import load_script

    monkeypatch.setenv("RACER_BENCH_DATA", str(tmp_path / "data"))
    recorded = {"task": {"name": "gsm8k", "data_dir": "<data_dir>"},
                "model": {"cache_dir": "~/.cache/racer_bench/models"},
                "paths": {"data_dir": "<data_dir>"}}  # fmt: skip
    (tmp_path / "manifest.json").write_text(json.dumps({"config": recorded}))
    cfg = load_script("add_quality").run_config(tmp_path)
    assert cfg.task.data_dir == cfg.paths.data_dir
    assert "<data_dir>" not in cfg.task.data_dir
    assert cfg.model.cache_dir.startswith(str(Path.home()))


def test_every_prompt_records_its_threads_and_the_summary_their_counts(grid_dir):
    out, summaries = grid_dir
    threads = [r["threads"] for r in records.load_prompts(out / "0")]
    assert len(threads) == 3 and all(t >= 1 for t in threads)
    load = summaries[0]["load"]
    assert sum(load["threads_per_prompt"].values()) == 3
    assert load["threads_requested"] >= max(threads)
