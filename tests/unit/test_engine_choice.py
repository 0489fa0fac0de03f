"""engine=auto by measurement: the faster engine wins, the choice is cached per machine."""

from __future__ import annotations

import json

import pytest

from racer_bench.engine import engine_choice as E


class FakeTarget:
    """Records engine switches; the fast engine cannot be undone, as on a real target."""

    name, dtype, device = "fake", "torch.float32", "cpu"

    def __init__(self) -> None:
        self.engine = "eager"

    def set_engine(self, engine: str) -> str:
        assert not (self.engine == "fast" and engine == "eager"), "fast cannot be undone"
        self.engine = engine
        return engine


def fake_timer(speeds: dict[str, float]):
    calls: list[str] = []

    def timer(target) -> dict[str, float]:
        calls.append(target.engine)
        return {"ar_step_s": speeds[target.engine], "tree_step_s": 2 * speeds[target.engine]}

    return timer, calls


@pytest.mark.parametrize(
    ("speeds", "winner"),
    [({"eager": 2.0, "fast": 1.0}, "fast"), ({"eager": 1.0, "fast": 2.0}, "eager")],
)
def test_the_faster_engine_is_chosen_and_recorded(tmp_path, speeds, winner) -> None:
    timer, calls = fake_timer(speeds)
    rebuilt: list[FakeTarget] = []

    def rebuild() -> FakeTarget:
        rebuilt.append(FakeTarget())
        return rebuilt[-1]

    target, record = E.choose_auto(FakeTarget(), tmp_path, rebuild, timer)
    assert calls == ["eager", "fast"]
    assert target.engine == winner and record["chosen"] == winner
    assert bool(rebuilt) == (winner == "eager")  # a fresh target when eager wins
    assert record["timings"]["fast"]["tree_step_s"] == 2 * speeds["fast"]
    assert record["cached"] is False and f"{winner} is faster" in record["why"]
    saved = json.loads((tmp_path / E.CHOICE_DIR / record["cache_file"]).read_text())
    assert saved["chosen"] == winner and saved["timings"] == record["timings"]


def test_the_choice_is_measured_once_per_machine_and_model(tmp_path) -> None:
    timer, calls = fake_timer({"eager": 2.0, "fast": 1.0})
    E.choose_auto(FakeTarget(), tmp_path, FakeTarget, timer)
    target, record = E.choose_auto(FakeTarget(), tmp_path, FakeTarget, timer)
    assert calls == ["eager", "fast"]  # the second run reads the cache
    assert record["cached"] is True and target.engine == "fast"
    assert record["timings"]["eager"]["ar_step_s"] == 2.0
    other = FakeTarget()
    other.name = "other"
    E.choose_auto(other, tmp_path, FakeTarget, timer)
    assert len(calls) == 4  # another model is measured again


def test_a_gpu_target_keeps_eager_without_measuring(tmp_path) -> None:
    timer, calls = fake_timer({"eager": 2.0, "fast": 1.0})
    target = FakeTarget()
    target.device = "cuda"
    _, record = E.choose_auto(target, tmp_path, FakeTarget, timer)
    assert calls == [] and record["chosen"] == "eager" and "CPU-only" in record["why"]


def test_real_timings_on_the_tiny_model(tiny_target) -> None:
    timings = E.engine_timings(tiny_target, reps=2, tree_tokens=4)
    assert timings["ar_step_s"] > 0 and timings["tree_step_s"] > 0
