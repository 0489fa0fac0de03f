"""A scheduler=confidence run on the tiny model: summary keys, run-folder files, figures."""

from __future__ import annotations

import json

import pytest

from racer_bench.analysis import frames, plots
from racer_bench.analysis.summary import summarize
from racer_bench.record.folder import PROMPTS_FILE, load_prompts
from racer_bench.run.runner import run
from racer_bench.run.setup import PROFILE_FILE
from tests.integration.test_runner import SMOKE
from tests.scripts import load_script

SCHEDULER_KEYS = ("candidate_size_mean", "predicted_accepted_mean", "realised_accepted_mean",
                  "calibration_error", "tokens_per_cost", "draft_size_hist")  # fmt: skip


@pytest.fixture(scope="module")
def scheduled_run(tmp_path_factory):
    from hydra import compose, initialize_config_dir

    from tests.conftest import CONF_DIR

    out = tmp_path_factory.mktemp("scheduled")
    overrides = [*SMOKE, "method=logitspec", "task.limit=2", "max_new_tokens=24",
                 "scheduler=confidence", "scheduler.profile=linear:0.02"]  # fmt: skip
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    summary = run(cfg, out, {"method": "logitspec", "scheduler": "confidence"})
    return out, summary


def test_scheduled_run_writes_its_metrics_and_profile(scheduled_run):
    out, summary = scheduled_run
    for key in SCHEDULER_KEYS:
        assert key in summary, key
    assert summary["identical"] == 1.0
    assert 0.0 <= summary["calibration_error"] <= 1.0
    assert summary["candidate_size_mean"] >= summary["draft_size_mean"]
    assert sum(summary["draft_size_hist"].values()) > 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["scheduler"] == "confidence"
    assert manifest["scheduler_persist_across_prompts"] is False
    assert manifest["cost_profile"] == {"file": PROFILE_FILE, "source": "linear:0.02"}
    assert manifest["config"]["method"]["draft_tree_capacity"] == 64  # generous candidates
    profile = json.loads((out / PROFILE_FILE).read_text())
    assert profile["costs"][0] == 1.0 and profile["sizes"][-1] >= 64
    turn = load_prompts(out)[0]["method"]["turns"][0]
    steps = turn["steps"]
    assert len(steps["predicted_accepted"]) == len(steps["n_draft"]) == len(steps["cost"])
    assert all(c >= d for c, d in zip(steps["n_candidates"], steps["n_draft"], strict=True))
    assert sum(turn["calibration"]["count"]) == sum(steps["n_draft"])


def test_scheduled_run_draws_both_figures(scheduled_run, tmp_path):
    out, _ = scheduled_run
    runs = frames.load_runs(out)
    assert frames.run_label(runs[0]) == "LogitSpec + confidence scheduler [profile=linear:0.02]"
    cal = frames.calibration_frame(runs)
    assert cal["nodes"].sum() > 0 and cal["predicted"].between(0, 1).all()
    sizes = frames.draft_sizes_frame(runs)
    assert sizes["share"].sum() == pytest.approx(1.0)
    assert sizes["cost"].is_monotonic_increasing
    figures = plots.all_figures(runs)
    assert {"reliability", "draft_size_cost"} <= set(figures)
    reliability = figures["reliability"]
    assert "ECE" in reliability.legends[0].get_texts()[1].get_text()
    args = ["--results", str(out), "--out", str(tmp_path), "--formats", "png",
            "--only", "reliability", "draft_size_cost"]  # fmt: skip
    written = load_script("make_figures").main(args)
    assert sorted(p.name for p in written) == ["draft_size_cost.png", "reliability.png"]


def test_runs_without_scheduler_fields_still_load(scheduled_run, tmp_path):
    """Records written before the scheduler existed: no new keys, no new figures, no errors."""
    out, _ = scheduled_run
    old = tmp_path / "old"
    old.mkdir()
    manifest = json.loads((out / "manifest.json").read_text())
    for key in ("scheduler", "scheduler_persist_across_prompts", "cost_profile"):
        manifest.pop(key)
    (old / "manifest.json").write_text(json.dumps(manifest))
    lines = []
    for record in load_prompts(out):
        for mode in ("method", "baseline"):
            for turn in record[mode]["turns"]:
                turn.pop("calibration", None)
                for key in ("n_candidates", "predicted_accepted", "cost"):
                    turn["steps"].pop(key, None)
        lines.append(json.dumps(record))
    (old / PROMPTS_FILE).write_text("\n".join(lines) + "\n")
    summary = summarize(load_prompts(old), "nonempty", True)
    assert not set(SCHEDULER_KEYS) & set(summary) and summary["mat"] >= 1.0
    runs = frames.load_runs(old)
    assert frames.calibration_frame(runs).empty and frames.draft_sizes_frame(runs).empty
    assert not {"reliability", "draft_size_cost"} & set(plots.all_figures(runs))


def test_the_scheduler_takes_the_cost_curve_of_the_threads_each_prompt_runs_on(tmp_path):
    """When the thread governor changes torch's threads, a measured (``auto``) curve is
    measured for the new count, given to every scheduled mode and saved in the run folder."""
    import torch
    from hydra import compose, initialize_config_dir

    from racer_bench.run.runner import finalize
    from racer_bench.run.setup import build
    from racer_bench.run.threads import follow_threads
    from tests.conftest import CONF_DIR

    cache = tmp_path / "cache"
    overrides = [*SMOKE, "method=racer", "scheduler=confidence", "scheduler.profile_reps=1",
                 "scheduler.profile_context=8", f"paths.cache_dir={cache}"]  # fmt: skip
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        setup = build(cfg)
        first = setup.profile
        assert first is not None and first.meta["key"]["threads"] == 2
        follow_threads(setup, 2)
        assert setup.modes[-1].scheduler.profile is first
        torch.set_num_threads(1)
        follow_threads(setup, 1)
        one = setup.modes[-1].scheduler.profile
        assert one is not first and one.meta["key"]["threads"] == 1
        assert sorted(setup.profiles) == [1, 2]
        torch.set_num_threads(2)
        follow_threads(setup, 2)
        assert setup.modes[-1].scheduler.profile is first
    finally:
        torch.set_num_threads(before)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    finalize(setup, run_dir)
    saved = json.loads((run_dir / "cost_profile_t1.json").read_text())
    assert saved["meta"]["key"]["threads"] == 1
    assert not (run_dir / "cost_profile_t2.json").exists()  # the first is PROFILE_FILE


def test_a_synthetic_curve_does_not_follow_threads():
    """``linear:0.02`` does not depend on the machine: nothing is measured when threads change."""
    from racer_bench.engine.schedule.cost import synthetic
    from racer_bench.engine.schedule.scheduler import ConfidenceScheduler
    from racer_bench.run.setup import Mode, Setup
    from racer_bench.run.threads import follow_threads

    curve = synthetic("linear:0.02")
    mode = Mode("method", drafter=None, verifier=None, scheduler=ConfidenceScheduler(curve))
    setup = Setup(cfg=None, target=None, task=None, modes=[mode], options=None,
                  max_new_tokens=1, profile=curve)  # fmt: skip
    follow_threads(setup, 1)
    assert setup.profiles == {} and mode.scheduler.profile is curve


def test_each_contender_keeps_its_own_curve_and_what_it_followed():
    """In a sitting every contender has its own curve at the start's thread count; setting the
    same curve again before each prompt must not restart what a scheduler learnt."""
    from racer_bench.engine.schedule.cost import CostProfile
    from racer_bench.engine.schedule.scheduler import ConfidenceOptions, ConfidenceScheduler
    from racer_bench.run.setup import Mode, Setup
    from racer_bench.run.threads import follow_threads

    key, follow = {"key": {"threads": 2}}, ConfidenceOptions(follow_cost=True)
    short, long = CostProfile([1], [1.0], key), CostProfile([1, 8, 64], [1.0, 1.5, 4.0], key)
    modes = [Mode(name, drafter=None, verifier=None, scheduler=ConfidenceScheduler(curve, follow))
             for name, curve in (("ar", short), ("racer", long))]  # fmt: skip
    setup = Setup(cfg=None, target=None, task=None, modes=modes, options=None,
                  max_new_tokens=1, profile=short)  # fmt: skip
    follower = modes[1].scheduler.follower
    follower.observe(8, 0.02)
    for _ in range(3):  # before every prompt
        follow_threads(setup, 2)
    assert modes[0].scheduler.profile is short and modes[1].scheduler.profile is long
    assert modes[1].scheduler.follower is follower and follower.observed == 1


@pytest.mark.parametrize("follow", [True, False])
def test_only_a_run_that_follows_the_machine_times_its_forwards(tmp_path, follow):
    from hydra import compose, initialize_config_dir

    from tests.conftest import CONF_DIR

    overrides = [*SMOKE, "method=racer", "task.limit=1", "max_new_tokens=24",
                 "scheduler=confidence", "scheduler.profile_reps=1",
                 "scheduler.profile_context=8", f"paths.cache_dir={tmp_path / 'cache'}",
                 f"scheduler.follow_cost={str(follow).lower()}"]  # fmt: skip
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    summary = run(cfg, tmp_path / "run", {"method": "racer", "scheduler": "confidence"})
    followed = (summary["cost_followed"] or {}).get("method")
    assert (followed is not None and followed["forwards"] > 0) == follow
    assert (tmp_path / "run" / "cost_followed_method.json").exists() == follow
