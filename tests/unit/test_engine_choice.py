"""engine=auto and dtype=auto by measurement: the fastest exact candidate wins, cached."""

from __future__ import annotations

import json

import pytest

from racer_bench.engine.fast import engine_choice, kernel_library
from racer_bench.models.loaders import tiny_random


class FakeTarget:
    """Records engine switches; the fast engine cannot be undone, as on a real target."""

    device = "cpu"

    def __init__(self, dtype: str = "float32") -> None:
        self.engine = "eager"
        self.dtype = f"torch.{dtype}"

    def set_engine(self, engine: str) -> str:
        assert not (self.engine == "fast" and engine == "eager"), "fast cannot be undone"
        self.engine = engine
        return engine


def fakes(speeds: dict[str, float], exact: set[str]):
    """A builder, a timer and a prober over (engine/dtype) labels; ``calls`` lists the timed."""
    calls: list[str] = []

    def name(target: FakeTarget) -> str:
        return f"{target.engine}/{target.dtype.removeprefix('torch.')}"

    def timer(target: FakeTarget) -> dict[str, float]:
        calls.append(name(target))
        return {"ar_step_s": speeds[name(target)], "tree_step_s": 2 * speeds[name(target)]}

    return FakeTarget, timer, (lambda target: name(target) in exact), calls


SPEEDS = {"eager/float32": 3.0, "fast/float32": 2.0, "eager/bfloat16": 0.5, "fast/bfloat16": 1.0}


def choose(tmp_path, engine="auto", dtype="auto", exact=("fast/float32", "fast/bfloat16"),
           speeds=SPEEDS, name="model"):  # fmt: skip
    build, timer, prober, calls = fakes(speeds, set(exact))
    target, record = engine_choice.choose(
        build, engine, dtype, tmp_path, name, "cpu", timer, prober
    )
    return target, record, calls


def test_the_fastest_exact_candidate_wins_and_is_recorded(tmp_path) -> None:
    target, record, calls = choose(tmp_path)
    assert sorted(calls) == sorted(SPEEDS)  # every (engine, dtype) pair timed
    assert (target.engine, target.dtype) == ("fast", "torch.bfloat16")
    assert record["chosen"] == "fast" and record["dtype"] == "bfloat16"
    assert record["candidates"]["eager/bfloat16"]["exact"] is False  # faster, but not exact
    assert "fast/bfloat16 is the fastest exact candidate" in record["why"]
    saved = json.loads((tmp_path / engine_choice.CHOICE_DIR / record["cache_file"]).read_text())
    assert saved["candidates"] == record["candidates"] and record["cached"] is False


def test_without_an_exact_candidate_the_fastest_runs_and_the_reason_says_so(tmp_path) -> None:
    target, record, _ = choose(tmp_path, exact=())
    assert (target.engine, record["dtype"]) == ("eager", "bfloat16")
    assert "no candidate is exact" in record["why"]


def test_an_explicit_dtype_or_engine_narrows_the_candidates(tmp_path) -> None:
    _, record, calls = choose(tmp_path, dtype="float32")
    assert sorted(calls) == ["eager/float32", "fast/float32"] and record["chosen"] == "fast"
    _, record, calls = choose(tmp_path, engine="eager", dtype="float32")
    assert calls == [] and record["chosen"] == "eager" and "requested" in record["why"]


def test_the_choice_is_measured_once_per_machine_model_and_request(tmp_path) -> None:
    choose(tmp_path)
    target, record, calls = choose(tmp_path)
    assert calls == [] and record["cached"] is True  # the second run reads the cache
    assert (target.engine, target.dtype) == ("fast", "torch.bfloat16")
    _, _, calls = choose(tmp_path, name="other")
    assert len(calls) == 4  # another model is measured again


def test_a_gpu_target_keeps_eager_without_measuring(tmp_path) -> None:
    build, timer, prober, calls = fakes(SPEEDS, set())
    _, record = engine_choice.choose(build, "auto", "float16", tmp_path, "m", "cuda", timer, prober)
    assert calls == [] and record["chosen"] == "eager" and "CPU-only" in record["why"]
    assert record["dtype"] == "float16"


def test_real_timings_on_the_tiny_model(tiny_target) -> None:
    timings = engine_choice.engine_timings(tiny_target, reps=2, tree_tokens=4)
    assert timings["ar_step_s"] > 0 and timings["tree_step_s"] > 0


@pytest.mark.skipif(kernel_library.unavailable_reason() is not None, reason="no kernels")
@pytest.mark.parametrize(("engine", "exact"), [("fast", True), ("eager", False)])
def test_the_probe_tells_the_row_invariant_engine_in_bfloat16(engine, exact) -> None:
    target = tiny_random(dtype="bfloat16", num_kv_heads=2, init_std=0.05)
    target.set_engine(engine)
    assert engine_choice.probe_exact(target) is exact


def test_a_candidate_is_timed_only_after_its_warm_up(tiny_target, monkeypatch) -> None:
    calls: list[int] = []
    real = engine_choice.cost.target_timer

    def counting(target, context):
        timer = real(target, context)

        def timed(n: int) -> float:
            calls.append(n)
            return timer(n)

        return timed

    monkeypatch.setattr(engine_choice.cost, "target_timer", counting)
    timings = engine_choice.engine_timings(tiny_target, reps=2, tree_tokens=4, warm_s=0.05)
    assert timings["warmup_rounds"] >= engine_choice.WARM_ROUNDS
    assert timings["warmup_s"] >= 0.05
    assert len(calls) == 2 * timings["warmup_rounds"] + 2 * 2  # warm pairs, then the timed ones
