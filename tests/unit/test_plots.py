"""Figures from fake run folders: what each draws, when it refuses, how it is saved."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PathCollection
from matplotlib.patches import Rectangle

from racer_bench.analysis import frames, plots
from tests.unit.test_frames import SPEC_CATEGORIES, write_run


def bars(ax) -> list[Rectangle]:
    return [p for p in ax.patches if isinstance(p, Rectangle)]


@pytest.fixture
def runs(tmp_path: Path) -> list[frames.Run]:
    write_run(tmp_path, "pld", "pld", "spec_bench", SPEC_CATEGORIES, 12, accept=0.5)
    write_run(tmp_path, "racer", "racer", "spec_bench", SPEC_CATEGORIES, 12, accept=1.5, ranks=True)
    write_run(tmp_path, "last", "racer", "spec_bench", SPEC_CATEGORIES, 12, accept=1.0,
              ranks=True, method_cfg={"logit_source": "last"})  # fmt: skip
    write_run(tmp_path, "he", "racer", "humaneval", ("humaneval",), 4, ranks=True)
    return frames.load_runs(tmp_path)


def test_pareto_front_keeps_undominated_points() -> None:
    x = np.array([0.0, 1.0, 2.0, 1.0, np.nan, 2.0])
    y = np.array([3.0, 2.0, 1.0, 1.0, 9.0, 1.0])
    # (1, 1) is beaten by (1, 2); the duplicate (2, 1) points do not beat each other
    assert plots.pareto_front(x, y).tolist() == [True, True, True, False, False, True]


def test_pareto_front_over_more_columns_skips_unmeasured_ones() -> None:
    gain = np.array([3.0, 2.0, 1.0])
    agreement = np.array([0.1, 0.5, 0.4])
    unmeasured = np.full(3, np.nan)
    assert plots.pareto_front(gain, agreement, unmeasured).tolist() == [True, True, False]
    assert plots.pareto_front(gain, np.array([0.1, 0.5, 0.9])).tolist() == [True, True, True]


def test_speedup_bars_have_one_bar_per_run_and_ci_whiskers(runs: list[frames.Run]) -> None:
    df = frames.runs_frame(runs)
    fig = plots.speedup_mat_bars(df)
    ax_speed, ax_mat = fig.axes
    assert len(bars(ax_speed)) == 3 * 2  # 3 labels x 2 tasks (a missing pair draws NaN)
    heights = sorted(b.get_height() for b in bars(ax_speed) if not np.isnan(b.get_height()))
    assert heights == pytest.approx(sorted(df["speedup"]))
    assert [t.get_text() for t in ax_speed.get_xticklabels()] == ["Spec-Bench", "HumanEval"]
    assert ax_speed.lines or ax_speed.collections  # CI whiskers drawn
    assert "MAT" in ax_mat.get_ylabel() and "speedup" in ax_speed.get_ylabel()
    assert "tiny_random" in fig._suptitle.get_text()
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["PLD", "RACER", "RACER [logit_source=last]"]


def test_category_bars_use_reporting_groups(runs: list[frames.Run]) -> None:
    fig = plots.category_bars(frames.categories_frame(runs), frames.runs_frame(runs))
    ticks = [t.get_text() for t in fig.axes[1].get_xticklabels()]
    assert ticks == ["multi turn", "translation", "summarization", "qa", "rag"]
    assert len(bars(fig.axes[0])) == 3 * 5


def test_histogram_shares_match_the_frame(runs: list[frames.Run]) -> None:
    hist = frames.hist_frame(runs)
    fig = plots.accept_hist(hist)
    assert len(fig.axes) == 2  # one panel per task
    spec = hist[hist["task"] == "spec_bench"]
    drawn = [b.get_height() for b in bars(fig.axes[0]) if not np.isnan(b.get_height())]
    assert sorted(drawn) == pytest.approx(sorted(spec["share"] * 100))


def test_rank_distribution_labels_carry_mat(runs: list[frames.Run]) -> None:
    fig = plots.rank_distribution(frames.ranks_frame(runs))
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(text.startswith("RACER [logit_source=last] (MAT ") for text in legend)
    assert "rank" in fig.axes[0].get_xlabel()


def test_capacity_curves_need_two_capacities(tmp_path: Path) -> None:
    for capacity in (15, 63):
        write_run(tmp_path, f"c{capacity}", "racer", method_cfg={"capacity": capacity})
    write_run(tmp_path, "pld", "pld")
    df = frames.runs_frame(frames.load_runs(tmp_path))
    fig = plots.capacity_curves(df)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["RACER · tiny"]
    assert fig.axes[0].lines[0].get_xdata().tolist() == [15, 63]
    assert fig.axes[0].get_xscale() == "log"
    with pytest.raises(ValueError, match="capacities"):
        plots.capacity_curves(df[df["method"] == "pld"])


def test_asd_frontier_marks_pareto_points(tmp_path: Path) -> None:
    for i, budget in enumerate((0.0, 4.0, 8.0)):
        write_run(tmp_path, f"b{i}", "pld", "gsm8k", ("gsm8k",), 6, verifier="asd", strict=True,
                  verifier_cfg={"budget": budget}, seed=i)  # fmt: skip
    df = frames.runs_frame(frames.load_runs(tmp_path))
    fig = plots.asd_frontier(df)
    front = plots.pareto_front(df["accuracy_delta"].to_numpy(), df["gain_vs_strict"].to_numpy())
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert len(texts) == front.sum() and all(t.startswith("B=") for t in texts)
    default = df[df["verifier.budget"] == 8.0].iloc[0]
    assert default["label"] == "PLD + ASD"  # the YAML defaults: no variant in the label
    assert plots.asd_label(default) == "B=8 g=0.25 M=2"


def test_asd_frontier_has_a_panel_per_quality_measure(tmp_path: Path) -> None:
    for i, (method, budget) in enumerate((("pld", 4.0), ("pld", 8.0), ("racer", 8.0))):
        write_run(tmp_path, f"r{i}", method, "gsm8k", ("gsm8k",), 6, verifier="asd",
                  strict=True, verifier_cfg={"budget": budget}, seed=i)  # fmt: skip
    df = frames.runs_frame(frames.load_runs(tmp_path))
    fig = plots.asd_frontier(df.assign(logprob_gap=[-0.1, -0.3, -0.2]))
    loglik = fig.axes[2]
    assert "log-lik" in loglik.get_xlabel()
    points = [c for c in loglik.collections if isinstance(c, PathCollection)]
    loss = sorted({round(float(x), 6) for c in points for x, _ in c.get_offsets()})
    assert loss == pytest.approx([0.1, 0.2, 0.3])  # loss = minus the gap
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["PLD", "RACER"]
    unmeasured = plots.asd_frontier(df.drop(columns=["logprob_gap"]))
    assert [t.get_text() for t in unmeasured.axes[2].texts] == [plots.NOT_MEASURED]
    assert not unmeasured.axes[2].collections


def test_figures_refuse_frames_without_their_data(runs: list[frames.Run]) -> None:
    df = frames.runs_frame(runs)
    with pytest.raises(ValueError):
        plots.asd_frontier(df)
    with pytest.raises(ValueError):
        plots.speedup_mat_bars(df.assign(speedup=np.nan))
    with pytest.raises(ValueError):
        plots.rank_distribution(pd.DataFrame())


def test_all_figures_and_save(runs: list[frames.Run], tmp_path: Path) -> None:
    figures = plots.all_figures(runs)
    assert set(figures) == {"speedup_mat", "categories", "accept_hist", "retrieval",
                            "accepted_ranks"}  # fmt: skip
    paths = plots.save_figure(figures["speedup_mat"], tmp_path / "figs", "speedup_mat")
    assert [p.suffix for p in paths] == [".png", ".pdf"]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert paths[1].read_bytes()[:5] == b"%PDF-"


def test_long_accepted_lengths_are_pooled() -> None:
    hist = pd.DataFrame({"label": ["A"] * 4 + ["B"], "n_accepted": [0, 9, 10, 14, 12],
                         "share": [0.5, 0.1, 0.3, 0.1, 1.0]})  # fmt: skip
    pooled = plots.pool_tail(hist, 10).set_index(["label", "n_accepted"])["share"]
    assert pooled.to_dict() == pytest.approx({("A", "0"): 0.5, ("A", "9"): 0.1,
                                              ("A", "10+"): 0.4, ("B", "10+"): 1.0})  # fmt: skip


def test_method_colours_do_not_depend_on_the_figure() -> None:
    alone = plots.colors(["RACER"])
    together = plots.colors(["PLD", "RACER [lru=false]", "RACER", "LogitSpec"])
    assert alone["RACER"] == together["RACER"]
    assert len(set(together.values())) == 4
