"""Run folders -> frames: loading, recomputed summaries, labels, pairing checks.

``write_run`` builds schema-true run folders without a model (records go through
``racer_bench.run.prompt.generation_record``); the plot, table and notebook tests reuse it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from racer_bench.analysis import frames, metrics
from racer_bench.engine.structs import GenerationResult, Source, StepRecord
from racer_bench.record import folder as records
from racer_bench.run.prompt import generation_record
from tests.conftest import CONF_DIR

METRICS = {"tiny": "nonempty", "humaneval": "pass@1", "gsm8k": "accuracy", "mgsm_zh": "accuracy"}
T_FORWARD = 0.05  # seconds per target forward of the fake runs


def group_config(group: str, choice: str, changes: dict[str, Any] | None = None) -> dict[str, Any]:
    """``conf/<group>/<choice>.yaml`` as a GPU run resolves it, ``changes`` applied."""
    return frames.resolved_group(group, choice, CONF_DIR, context={"hardware": "gpu"}) | (
        changes or {}
    )


def fake_steps(rng: np.random.Generator, n_tokens: int, accept: float, ranks: bool,
               retrieval: float) -> list[StepRecord]:  # fmt: skip
    """Steps committing ``n_tokens`` with about ``accept`` accepted draft tokens per step."""
    steps: list[StepRecord] = []
    left = n_tokens
    while left > 0:
        drafted = 0 if accept == 0 else 8
        accepted = min(int(rng.poisson(accept)), drafted, left - 1)
        retrieved = int(rng.random() < retrieval) * accepted
        steps.append(StepRecord(
            n_draft=drafted, depth=min(drafted, 4), n_accepted=accepted,
            n_committed=accepted + 1, accepted_sources=[int(Source.RETRIEVAL)] * retrieved
            + [int(Source.MODEL)] * (accepted - retrieved),
            has_retrieval=retrieval > 0 and rng.random() < 0.5 + retrieval / 2,
            t_draft=1e-4, t_verify=T_FORWARD * (1 + drafted / 32), t_update=1e-4,
            accepted_ranks=[int(rng.geometric(0.5)) - 1 for _ in range(accepted)] if ranks else [],
        ))  # fmt: skip
        left -= accepted + 1
    return steps


def fake_turn(tokens: list[int], steps: list[StepRecord]) -> dict[str, Any]:
    decode = sum(s.t_draft + s.t_verify + s.t_update for s in steps)
    result = GenerationResult(tokens, "x" * len(tokens), 0.02, decode, steps, "length")
    return generation_record(result)


def fake_record(rng: np.random.Generator, index: int, category: str, spec: dict[str, Any]
                ) -> dict[str, Any]:  # fmt: skip
    """One ``ok`` prompt line: baseline, method (and strict when ``spec["strict"]``)."""
    n = int(spec["max_new_tokens"])
    tokens = rng.integers(0, 200, n).tolist()
    record: dict[str, Any] = {"id": f"{spec['task']}/{index}", "category": category,
                              "index": index, "status": "ok"}  # fmt: skip
    record["baseline"] = {"turns": [fake_turn(tokens, fake_steps(rng, n, 0, False, 0))]}
    method_tokens = tokens
    if spec["strict"] and rng.random() < spec["diverge"]:
        method_tokens = [*tokens[:-1], 201]
    steps = fake_steps(rng, n, spec["accept"], spec["ranks"], spec["retrieval"])
    record["method"] = {"turns": [fake_turn(method_tokens, steps)]}
    record["identical"] = method_tokens == tokens
    metric = METRICS.get(spec["task"])
    if metric:
        record["score"] = {metric: float(rng.random() < spec["quality"])}
        record["baseline_score"] = {metric: float(rng.random() < 0.5)}
    if spec["strict"]:
        strict = fake_steps(rng, n, spec["accept"] * 0.8, spec["ranks"], spec["retrieval"])
        record["strict"] = {"turns": [fake_turn(tokens, strict)]}
        record["strict_score"] = {metric: float(rng.random() < 0.5)} if metric else {}
    return record


def write_run(
    root: Path,
    name: str,
    method: str = "pld",
    task: str = "tiny",
    categories: Sequence[str] = ("tiny",),
    n_prompts: int = 4,
    **kw: Any,
) -> Path:
    """A fake run folder ``root/name`` (see ``fake_record`` for the keyword knobs)."""
    spec = {"task": task, "max_new_tokens": 24, "accept": 1.0, "ranks": False, "retrieval": 0.3,
            "strict": False, "diverge": 0.5, "quality": 0.5, "seed": 0, "method_cfg": {},
            "verifier": "greedy", "verifier_cfg": {}, "dtype": "float64", "device": "cpu:test",
            "started": "2026-01-01T00:00:00", "failed": 0, "experiment": "test"} | kw  # fmt: skip
    run_dir = Path(root) / name
    run_dir.mkdir(parents=True)
    config = {"experiment_name": spec["experiment"], "max_new_tokens": spec["max_new_tokens"],
              "hardware": "gpu",
              "method": group_config("method", method, spec["method_cfg"]),
              "verifier": group_config("verifier", spec["verifier"], spec["verifier_cfg"]),
              "task": group_config("task", task)}  # fmt: skip
    fields = {"model": "tiny_random", "model_name": "tiny_random", "method": method,
              "verifier": spec["verifier"], "lossless": not spec["strict"], "task": task,
              "dtype": spec["dtype"], "device": spec["device"], "seed": spec["seed"],
              "max_new_tokens": spec["max_new_tokens"], "started": spec["started"],
              "config": config, **spec.get("manifest", {})}  # fmt: skip
    records.write_json(run_dir / records.MANIFEST_FILE, records.manifest(fields, run_dir))
    rng = np.random.default_rng(spec["seed"])
    for i in range(n_prompts):
        records.append_prompt(run_dir, fake_record(rng, i, categories[i % len(categories)], spec))
    for i in range(spec["failed"]):
        records.append_prompt(run_dir, {"id": f"{task}/f{i}", "category": categories[0],
                                  "index": n_prompts + i, "status": "failed",
                                  "error": "RuntimeError: boom"})  # fmt: skip
    return run_dir


SPEC_CATEGORIES = ("writing", "coding", "translation", "qa", "summarization", "rag")


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """A results folder: PLD and RACER on tiny and Spec-Bench, one RACER ablation."""
    root = tmp_path / "results"
    write_run(root / "exp", "0", "pld", accept=0.5)
    write_run(root / "exp", "1", "racer", accept=1.5, ranks=True, failed=1)
    write_run(root / "exp", "2", "racer", accept=1.0, ranks=True,
              method_cfg={"logit_source": "last"})  # fmt: skip
    write_run(root / "other", "0", "racer", "spec_bench", SPEC_CATEGORIES, 12, accept=1.2)
    return root


def test_load_runs_finds_nested_folders_with_relative_ids(results: Path) -> None:
    runs = frames.load_runs(results)
    assert sorted(r.run_id for r in runs) == ["exp/0", "exp/1", "exp/2", "other/0"]
    assert frames.load_runs([results / "exp" / "1"])[0].run_id == "1"
    with pytest.raises(FileNotFoundError):
        frames.load_runs(results / "exp" / "missing")


def test_runs_frame_reuses_metric_definitions(results: Path) -> None:
    runs = frames.load_runs(results)
    df = frames.runs_frame(runs).set_index("run_id")
    for run in runs:
        row = df.loc[run.run_id]
        assert row["speedup"] == pytest.approx(metrics.speedup(run.ok))
        assert row["mat"] == pytest.approx(metrics.mat(run.ok))
        assert row["n_prompts"] == len(run.ok)
        assert row["mat_ci_low"] <= row["mat"] <= row["mat_ci_high"]
        assert row["speedup_ci_low"] <= row["speedup"] <= row["speedup_ci_high"]
    assert df.loc["exp/1", "n_failed"] == 1
    assert df.loc["exp/0", "score"] == pytest.approx(metrics.mean_score(runs[0].ok, "nonempty"))


def test_labels_name_the_non_default_hyperparameters(results: Path) -> None:
    df = frames.runs_frame(frames.load_runs(results)).set_index("run_id")
    assert df.loc["exp/1", "label"] == "RACER"
    assert df.loc["exp/2", "label"] == "RACER [logit_source=last]"
    assert df.loc["exp/2", "method.logit_source"] == "last"
    assert df.loc["exp/1", "capacity"] == 63


def test_family_drops_the_capacity(tmp_path: Path) -> None:
    write_run(tmp_path, "a", "racer", method_cfg={"capacity": 15, "lru": False})
    df = frames.runs_frame(frames.load_runs(tmp_path))
    assert df.loc[0, "label"] == "RACER [capacity=15, lru=false]"
    assert df.loc[0, "family"] == "RACER [lru=false]"
    assert df.loc[0, "capacity"] == 15


def test_prompts_frame_has_one_row_per_prompt_line(results: Path) -> None:
    runs = frames.load_runs(results)
    df = frames.prompts_frame(runs)
    assert len(df) == sum(len(r.records) for r in runs)
    failed = df[df["status"] == "failed"]
    assert len(failed) == 1 and math.isnan(failed["speedup"].iloc[0])
    assert failed["error"].iloc[0].startswith("RuntimeError")
    spec = df[df["task"] == "spec_bench"]
    assert set(spec.loc[spec["category"].isin(["writing", "coding"]), "group"]) == {"multi_turn"}
    assert set(spec.loc[spec["category"] == "qa", "group"]) == {"qa"}
    run = next(r for r in runs if r.run_id == "exp/0")
    first = df[(df["run_id"] == "exp/0") & (df["index"] == 0)].iloc[0]
    assert first["speedup"] == pytest.approx(metrics.speedup(run.ok[:1]))


def test_categories_frame_merges_mt_bench(results: Path) -> None:
    runs = [r for r in frames.load_runs(results) if r.task == "spec_bench"]
    groups = frames.categories_frame(runs).set_index("category")
    assert set(groups.index) == {"multi_turn", "translation", "qa", "summarization", "rag"}
    assert groups["n_prompts"].sum() == 12
    assert groups.loc["multi_turn", "n_prompts"] == 4
    raw = frames.categories_frame(runs, level="category")
    assert set(raw["category"]) == set(SPEC_CATEGORIES)
    with pytest.raises(ValueError, match="level"):
        frames.categories_frame(runs, level="task")


def test_hist_and_ranks_frames_count_every_step(results: Path) -> None:
    runs = frames.load_runs(results)
    hist = frames.hist_frame(runs)
    for run in runs:
        rows = hist[hist["run_id"] == run.run_id]
        assert dict(zip(rows["n_accepted"], rows["steps"], strict=True)) == (
            metrics.acceptance_histogram(run.ok)
        )
        assert rows["share"].sum() == pytest.approx(1.0)
    ranks = frames.ranks_frame(runs)
    assert set(ranks["run_id"]) == {"exp/1", "exp/2"}  # only RACER fakes record ranks
    run = next(r for r in runs if r.run_id == "exp/1")
    n_ranks = sum(
        len(s) for r in run.ok for s in metrics.step_column(r, "method", "accepted_ranks")
    )
    assert ranks[ranks["run_id"] == "exp/1"]["count"].sum() == n_ranks


@pytest.mark.parametrize(
    ("change", "key"),
    [({"dtype": "float32"}, "dtype"), ({"device": "cuda:H100"}, "device")],
)
def test_refuses_to_pair_different_setups(tmp_path: Path, change: dict, key: str) -> None:
    write_run(tmp_path, "a")
    write_run(tmp_path, "b", **change)
    with pytest.raises(frames.IncompatibleRunsError, match=key) as info:
        frames.load_runs(tmp_path)
    assert "a" in str(info.value) and "b" in str(info.value)
    assert len(frames.load_runs(tmp_path, check=False)) == 2


def test_max_new_tokens_must_agree_within_a_task_only(tmp_path: Path) -> None:
    write_run(tmp_path, "a", "pld", "tiny")
    write_run(tmp_path, "b", "pld", "humaneval", ("humaneval",), max_new_tokens=16)
    assert len(frames.load_runs(tmp_path)) == 2
    write_run(tmp_path, "c", "racer", "tiny", max_new_tokens=16)
    with pytest.raises(frames.IncompatibleRunsError, match=r"max_new_tokens \(task tiny\)"):
        frames.load_runs(tmp_path)


def test_incomplete_runs_are_skipped_unless_asked(tmp_path: Path) -> None:
    write_run(tmp_path, "a")
    (write_run(tmp_path, "b") / frames.INCOMPLETE_FILE).write_text("stopped\n")
    assert [r.run_id for r in frames.load_runs(tmp_path)] == ["a"]
    runs = frames.load_runs(tmp_path, include_incomplete=True)
    assert [r.incomplete for r in runs] == [False, True]


def test_latest_runs_keeps_the_newest_rerun(tmp_path: Path) -> None:
    write_run(tmp_path, "old", started="2026-01-01T00:00:00")
    write_run(tmp_path, "new", started="2026-02-01T00:00:00", seed=1)
    write_run(tmp_path, "other", "racer")
    kept = frames.latest_runs(frames.load_runs(tmp_path))
    assert sorted(r.run_id for r in kept) == ["new", "other"]


def test_asd_runs_carry_strict_comparison(tmp_path: Path) -> None:
    write_run(tmp_path, "asd", "pld", "gsm8k", ("gsm8k",), 6, verifier="asd", strict=True,
              verifier_cfg={"budget": 4.0})  # fmt: skip
    run = frames.load_runs(tmp_path)[0]
    row = frames.runs_frame([run]).iloc[0]
    assert row["label"] == "PLD + ASD [budget=4.0]"
    assert row["verifier.budget"] == 4.0
    assert row["gain_vs_strict"] == pytest.approx(metrics.speedup(run.ok, "method", "strict") - 1)
    assert row["divergence"] == pytest.approx(
        1 - metrics.identical_rate(run.ok, "method", "strict")
    )
    decode_gain = metrics.decode_tokens_per_s(run.ok, "method") / metrics.decode_tokens_per_s(
        run.ok, "strict"
    )
    assert row["decode_gain_vs_strict"] == pytest.approx(decode_gain - 1)
    assert row["strict_score"] == pytest.approx(
        metrics.mean_score(run.ok, "accuracy", "strict_score")
    )
    prompts = frames.prompts_frame([run])
    assert {"strict_tokens_per_s", "strict_score", "gain_vs_strict"} <= set(prompts.columns)


def test_retrieval_accept_share_caps_each_step_at_its_accepted_nodes() -> None:
    """An old record whose last step kept a retrieval count past an EOS cut (3 > 1) counts
    at most that step's accepted nodes, so the share stays a share."""
    steps = {"n_accepted": [2, 1], "accepted_retrieval": [2, 3]}
    record = {"method": {"turns": [{"tokens": [1] * 5, "steps": steps}]}}
    assert metrics.retrieval_accept_share([record]) == 1.0
    steps["accepted_retrieval"] = [1, 0]
    assert metrics.retrieval_accept_share([record]) == pytest.approx(1 / 3)
