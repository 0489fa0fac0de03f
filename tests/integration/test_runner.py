"""The runner on the tiny model: output contract, resume, failures, interrupts."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest
from omegaconf import OmegaConf

from racer_bench.config.construct import construct
from racer_bench.errors import ConfigError, RunStopped
from racer_bench.record.folder import load_prompts
from racer_bench.run.runner import run
from racer_bench.tasks.tiny import TinyTask

CONTRACT = ("n_prompts", "new_tokens", "tokens_per_s", "baseline_tokens_per_s", "speedup", "mat",
            "identical", "draft_time_share", "retrieval_hit_rate", "nonempty")  # fmt: skip
SMOKE = ("model=tiny_random", "task=tiny", "max_new_tokens=16", "warmup_prompts=0")


class FlakyTask(TinyTask):
    """Raises on chosen prompts: ``fail_on`` with a RuntimeError, and the prompt at the class
    attribute ``interrupt_on`` with Ctrl-C (not a config key, so a resumed run, which restores
    the saved config, is not interrupted again once the test resets it)."""

    name: ClassVar[str] = "flaky"
    interrupt_on: ClassVar[int] = -1

    def __init__(self, fail_on: int = -1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fail_on = fail_on

    def render(self, prompt, turn, history, tokenizer):
        index = int(prompt.id.split("/")[1])
        if index == self.fail_on:
            raise RuntimeError("boom")
        if index == FlakyTask.interrupt_on:
            raise KeyboardInterrupt
        return super().render(prompt, turn, history, tokenizer)


FLAKY = f"task._target_={__name__}.FlakyTask"


def test_run_writes_the_output_contract(compose_cfg, tmp_path):
    cfg = compose_cfg(*SMOKE, "method=pld", "task.limit=3")
    summary = run(cfg, tmp_path, {"method": "pld"})
    for key in CONTRACT:
        assert key in summary, key
    assert summary["n_prompts"] == 3 and summary["identical"] == 1.0
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["speedup"] == pytest.approx(summary["speedup"])
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["lossless"] is True and manifest["method"] == "pld"
    lines = load_prompts(tmp_path)
    assert [r["id"] for r in lines] == ["tiny/0", "tiny/1", "tiny/2"]
    turn = lines[0]["method"]["turns"][0]
    assert len(turn["tokens"]) == 16 and len(turn["steps"]["n_committed"]) >= 1
    assert summary["mat"] >= 1.0


def test_a_lossy_run_measures_quality_against_strict(compose_cfg, tmp_path):
    cfg = compose_cfg(*SMOKE, "method=pld", "task.limit=3", "verifier=asd", "verifier.budget=50",
                      "verifier.gate=100", "verifier.cap=4")  # fmt: skip
    summary = run(cfg, tmp_path, {"method": "pld", "verifier": "asd"})
    assert summary["logprob_gap"] < 0 and summary["logprob_gap_n"] == 3
    assert summary["agreement_n"] == 3 and 0 <= summary["first_divergence"] < 1
    record = load_prompts(tmp_path)[0]
    assert "agreement" in record and "target_logprob" in record["strict"]["turns"][0]
    assert "target_logprob" not in record["baseline"]["turns"][0]  # AR is not paired


def test_a_lossy_run_at_budget_zero_has_no_quality_loss(compose_cfg, tmp_path):
    cfg = compose_cfg(*SMOKE, "method=pld", "task.limit=2", "verifier=asd", "verifier.budget=0")
    summary = run(cfg, tmp_path, {"method": "pld", "verifier": "asd"})
    assert summary["agreement"] == 1.0 and summary["logprob_gap"] == 0.0
    assert summary["first_divergence"] == 1.0 and summary["divergence"] == 0.0


def test_run_records_where_and_under_what_load_it_was_measured(compose_cfg, tmp_path):
    cfg = compose_cfg(*SMOKE, "method=pld", "task.limit=2", "engine=eager")
    summary = run(cfg, tmp_path, {"method": "pld"})
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    fingerprint = manifest["hardware"]
    assert fingerprint["id"] and fingerprint["label"] and "isa" in fingerprint
    assert fingerprint["threads"] == manifest["threads"]
    assert manifest["engine_choice"]["chosen"] == "eager"
    assert "requested" in manifest["engine_choice"]["why"]
    assert manifest["floor"]["floor_ms"] > 0 and manifest["floor"]["bandwidth_gbps"] > 0
    assert summary["ar_step_ms"] > 0
    assert summary["ar_step_floor_ratio"] == summary["ar_step_ms"] / manifest["floor"]["floor_ms"]
    assert manifest["git_sha"] is not None and "git_dirty" in manifest
    assert summary["hardware"] == {"id": fingerprint["id"], "label": fingerprint["label"]}
    load = json.loads((tmp_path / "summary.json").read_text())["load"]
    assert load["steps"] > 0 and load["wall_s"] > 0 and isinstance(load["alone"], bool)
    assert "loadavg_start" in load and "loadavg_end" in load
    assert summary["load_warning"] == load["warning"]
    startup = summary["startup"]  # this process's start, phase by phase, then the warm-up
    assert list(startup["phases"]) == [
        "imports_and_config",
        "task",
        "model",
        "method",
        "cost_profile",
        "reference_model",
        "floor",
        "prompts",
    ]
    assert all(s >= 0 for s in startup["phases"].values()) and startup["phases"]["model"] > 0
    assert sum(startup["phases"].values()) <= startup["ready_s"] + 0.01  # parts of the same span
    assert startup["warmup_s"] < 0.01  # warmup_prompts=0: nothing ran


@pytest.mark.parametrize("engine", ["eager", "fast"])
def test_reference_generate_runs_transformers_generate_on_the_same_prompts(
    compose_cfg, tmp_path, engine
):
    cfg = compose_cfg(*SMOKE, "method=pld", "task.limit=4", f"engine={engine}",
                      "reference=generate")  # fmt: skip
    summary = run(cfg, tmp_path, {"method": "pld"})
    records = load_prompts(tmp_path)
    turns = [r["reference"]["turns"] for r in records]
    assert [len(t) for t in turns] == [len(r["baseline"]["turns"]) for r in records]
    assert all(t["wall_time"] > 0 and 0 < len(t["tokens"]) <= 16 for ts in turns for t in ts)
    # generate() on the untouched model equals our AR loop token for token, on either engine
    assert summary["reference_identical"] == 1.0 and summary["reference_tokens_per_s"] > 0
    assert summary["startup"]["phases"]["reference_model"] >= 0
    assert records[0]["method"]["turns"][0]["steps"]["n_draft"]
    assert summary["load"]["steps"] == sum(
        len(t["steps"]["n_draft"]) for r in records for m in ("baseline", "method")
        for t in r[m]["turns"]
    )  # fmt: skip


def test_without_reference_nothing_runs_generate(compose_cfg, tmp_path):
    summary = run(compose_cfg(*SMOKE, "method=pld", "task.limit=1"), tmp_path, {"method": "pld"})
    assert "reference" not in load_prompts(tmp_path)[0]
    assert "reference_tokens_per_s" not in summary


def test_engine_and_dtype_auto_measure_every_pair_and_keep_an_exact_one(compose_cfg, tmp_path):
    cache = tmp_path / "cache"
    cfg = compose_cfg(*SMOKE, "method=pld", "task.limit=1", "engine=auto", "model.dtype=auto",
                      f"paths.cache_dir={cache}")  # fmt: skip
    run(cfg, tmp_path / "a", {"method": "pld"})
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    choice = manifest["engine_choice"]
    assert choice["requested"] == "auto" and choice["cached"] is False
    pairs = {f"{e}/{d}" for e in ("eager", "fast") for d in ("float32", "bfloat16")}
    assert set(choice["candidates"]) == pairs
    assert all(t["ar_step_s"] > 0 and t["tree_step_s"] > 0 for t in choice["candidates"].values())
    assert choice["candidates"][f"{choice['chosen']}/{choice['dtype']}"]["exact"] is True
    assert choice["candidates"]["fast/bfloat16"]["exact"] is True
    assert manifest["engine"]["engine"] == choice["chosen"] and manifest["dtype"] == choice["dtype"]
    run(cfg, tmp_path / "b", {"method": "pld"})  # same machine and model: from the cache
    again = json.loads((tmp_path / "b" / "manifest.json").read_text())["engine_choice"]
    assert again["cached"] is True and again["candidates"] == choice["candidates"]


def test_failed_prompt_is_recorded_and_run_goes_on(compose_cfg, tmp_path):
    cfg = compose_cfg(*SMOKE, "task.limit=3", FLAKY, "+task.fail_on=1")
    summary = run(cfg, tmp_path)
    statuses = [(r["id"], r["status"]) for r in load_prompts(tmp_path)]
    assert statuses == [("tiny/0", "ok"), ("tiny/1", "failed"), ("tiny/2", "ok")]
    assert "boom" in load_prompts(tmp_path)[1]["error"]
    assert summary["n_failed"] == 1 and summary["n_prompts"] == 2


def test_interrupt_keeps_finished_prompts_and_resume_continues(compose_cfg, tmp_path, monkeypatch):
    cfg = compose_cfg(*SMOKE, "task.limit=4", FLAKY)
    monkeypatch.setattr(FlakyTask, "interrupt_on", 2)
    with pytest.raises(
        RunStopped, match=rf"^stopped after 2 of 4 prompts; continue with resume={tmp_path}$"
    ):
        run(cfg, tmp_path)
    assert [r["id"] for r in load_prompts(tmp_path)] == ["tiny/0", "tiny/1"]
    assert (tmp_path / "INCOMPLETE").exists()
    assert (tmp_path / "prompts.jsonl").read_bytes().endswith(b"\n")  # no half-written line
    first = load_prompts(tmp_path)[0]
    monkeypatch.setattr(FlakyTask, "interrupt_on", -1)
    summary = run(compose_cfg(f"resume={tmp_path}"), tmp_path / "ignored")
    ids = [r["id"] for r in load_prompts(tmp_path)]
    assert ids == ["tiny/0", "tiny/1", "tiny/2", "tiny/3"]  # nothing redone
    assert load_prompts(tmp_path)[0] == first
    assert summary["n_prompts"] == 4 and not (tmp_path / "INCOMPLETE").exists()


def stop_after(compose_cfg, run_dir, monkeypatch, *overrides: str, at: int = 2) -> None:
    """A run of 4 tiny prompts stopped by Ctrl-C before prompt ``at``."""
    monkeypatch.setattr(FlakyTask, "interrupt_on", at)
    with pytest.raises(RunStopped):
        run(compose_cfg(*SMOKE, "task.limit=4", FLAKY, *overrides), run_dir, {"method": "racer"})
    monkeypatch.setattr(FlakyTask, "interrupt_on", -1)


def test_bare_resume_continues_the_saved_configuration(compose_cfg, tmp_path, monkeypatch):
    """Found by hand: ``resume=R`` alone ran AR on HumanEval into a RACER run folder."""
    stop_after(compose_cfg, tmp_path, monkeypatch, "method=racer")
    resume_arg = f"resume={tmp_path}"
    bare = compose_cfg(resume_arg)  # composes the defaults: smollm2, method=ar, task=humaneval
    assert bare.method._target_.endswith("NullDrafter") and "humaneval" in bare.task._target_
    summary = run(bare, tmp_path / "ignored", overrides=[resume_arg])
    records = load_prompts(tmp_path)
    assert [r["id"] for r in records] == ["tiny/0", "tiny/1", "tiny/2", "tiny/3"]
    for record in records:  # RACER drafted on every prompt (AR never drafts)
        assert sum(sum(t["steps"]["n_draft"]) for t in record["method"]["turns"]) > 0
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["method"] == "racer" and manifest["config"]["task"]["limit"] == 4
    assert manifest["config"]["resume"] is None  # the saved config is the one the run began with
    assert manifest["resumes"][0]["changed"] == {} and manifest["resumes"][0]["prompts_done"] == 2
    assert summary["n_prompts"] == 4 and summary["identical"] == 1.0
    assert not (tmp_path / "ignored").exists()


@pytest.mark.parametrize(
    ("overrides", "keys"),
    [
        (["method=pld"], "method"),
        (["method.capacity=3", "seed=5"], "method.capacity, seed"),
        (["task.limit=10"], "task.limit"),
        (["max_new_tokens=8", "baseline=none"], "max_new_tokens, baseline"),
        (["hardware=gpu"], "hardware"),
        (["model.num_layers=1"], "model.num_layers"),
        (["verifier=asd"], "verifier"),
    ],
)
def test_resume_refuses_overrides_that_change_results(
    overrides, keys, compose_cfg, tmp_path, monkeypatch
):
    stop_after(compose_cfg, tmp_path, monkeypatch, "method=racer")
    before = (tmp_path / "prompts.jsonl").read_bytes()
    args = [f"resume={tmp_path}", *SMOKE, "method=racer", "task.limit=4", FLAKY, *overrides]
    with pytest.raises(ConfigError) as error:
        run(compose_cfg(*args), tmp_path / "ignored", overrides=args)
    message = str(error.value)
    assert "\n" not in message and " of a saved run" in message
    named = message.split("cannot change ")[1].split(" of a saved run")[0].split(", ")
    assert set(keys.split(", ")) <= set(named)  # hardware=gpu also names method (capacity 63)
    assert (tmp_path / "prompts.jsonl").read_bytes() == before


def test_resume_applies_and_records_keys_that_do_not_change_results(
    compose_cfg, tmp_path, monkeypatch
):
    stop_after(compose_cfg, tmp_path, monkeypatch)
    args = [f"resume={tmp_path}", "num_threads=1", "warmup_prompts=1", "tags=[again]"]
    run(compose_cfg(*args), tmp_path / "ignored", overrides=args)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    changed = manifest["resumes"][0]["changed"]
    assert changed == {"num_threads": 1, "warmup_prompts": 1, "tags": ["again"]}
    assert len(load_prompts(tmp_path)) == 4


def test_finished_run_resumed_again_does_nothing(compose_cfg, tmp_path, capsys):
    run(compose_cfg(*SMOKE, "task.limit=2"), tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    summary = run(compose_cfg(f"resume={tmp_path}"), tmp_path / "ignored")
    assert "already finished; nothing to resume" in capsys.readouterr().out
    assert summary["n_prompts"] == 2
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


def test_new_run_into_a_folder_holding_a_run_is_refused(compose_cfg, tmp_path):
    run(compose_cfg(*SMOKE, "task.limit=1"), tmp_path)
    with pytest.raises(
        ConfigError, match=rf"already holds a run; continue it with resume={tmp_path}"
    ):
        run(compose_cfg(*SMOKE, "task.limit=1", "method=pld"), tmp_path)


def test_resume_drops_a_torn_last_line_and_redoes_that_prompt(compose_cfg, tmp_path):
    run(compose_cfg(*SMOKE, "task.limit=3"), tmp_path)
    path = tmp_path / "prompts.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    torn = lines[2][: len(lines[2]) // 2]  # as if SIGKILL hit while prompt 2 was being written
    path.write_bytes(b"".join(lines[:2]) + torn)
    (tmp_path / "INCOMPLETE").write_text("killed\n")
    assert [r["id"] for r in load_prompts(tmp_path)] == ["tiny/0", "tiny/1"]  # never read torn
    run(compose_cfg(f"resume={tmp_path}"), tmp_path / "ignored")
    assert (tmp_path / "prompts.jsonl.torn-1").read_bytes() == torn
    raw = path.read_bytes().splitlines()
    assert raw[:2] == [line.rstrip(b"\n") for line in lines[:2]]  # finished prompts untouched
    assert [json.loads(line)["id"] for line in raw] == ["tiny/0", "tiny/1", "tiny/2"]  # once each


def test_resume_on_another_kind_of_hardware_is_refused(compose_cfg, tmp_path, monkeypatch):
    stop_after(compose_cfg, tmp_path, monkeypatch)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    manifest["device"] = "NVIDIA H200"  # as if measured on a GPU; model.device=cpu here
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match=r"measured on gpu \(NVIDIA H200\) but model.device=cpu"):
        run(compose_cfg(f"resume={tmp_path}"), tmp_path / "ignored")


def not_a_config_check(**_: Any) -> None:
    json.loads("{")  # a ValueError raised by a library, not by the target's own checks


def test_constructor_checks_become_one_line_errors_others_keep_their_traceback(
    compose_cfg, tmp_path
):
    cfg = compose_cfg(*SMOKE, "method=racer", "method.max_nodes=5", "task.limit=1")
    with pytest.raises(ConfigError, match=r"^method.max_nodes=5: must exceed ngram \+ 1 with lru$"):
        run(cfg, tmp_path)  # keys that must agree: checked by the constructor
    assert not (tmp_path / "manifest.json").exists()
    with pytest.raises(Exception) as error:
        construct(OmegaConf.create({"_target_": f"{__name__}.not_a_config_check"}), "method")
    assert not isinstance(error.value, ConfigError)
    assert isinstance(error.value.__cause__, json.JSONDecodeError)


def test_repeats_run_every_prompt_again_and_the_interval_covers_them(compose_cfg, tmp_path):
    cfg = compose_cfg(*SMOKE, "method=pld", "task.limit=2", "repeats=3")
    summary = run(cfg, tmp_path, {"method": "pld"})
    lines = load_prompts(tmp_path)
    ids = [r["id"] for r in lines]
    assert ids == ["tiny/0", "tiny/1", "tiny/0#r1", "tiny/1#r1", "tiny/0#r2", "tiny/1#r2"]
    assert [r.get("repeat", 0) for r in lines] == [0, 0, 1, 1, 2, 2]
    same_prompt = [r["method"]["turns"][0]["tokens"] for r in lines if r["index"] == 0]
    assert all(tokens == same_prompt[0] for tokens in same_prompt)  # a repeat keeps its seed
    assert summary["n_prompts"] == 6 and len(summary["speedup_per_repeat"]) == 3
    low, high = summary["speedup_ci95"]
    assert low <= summary["speedup"] <= high
