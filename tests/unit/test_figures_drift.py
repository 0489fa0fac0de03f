"""The committed figures are what scripts/make_figures.py draws from committed records.

``docs/figures/generated.json`` names, per figure, the ``--results`` folders it was drawn from.
The test checks those folders are committed records under ``results/curated/``, redraws the
figures from them and compares the images pixel by pixel (a small tolerance absorbs font
rasterisation differences between machines; a changed bar, point or legend entry exceeds it).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image

from tests.conftest import REPO
from tests.scripts import load_script

INDEX = REPO / "docs/figures/generated.json"
ENTRIES = json.loads(INDEX.read_text())
MAX_CHANGED_PIXELS = 0.005  # share of pixels whose colour differs by more than 10 %


def changed_share(a: Path, b: Path) -> float:
    """Share of pixels that differ by more than 0.1 in some channel; 1.0 if the sizes differ."""
    left, right = image.imread(a), image.imread(b)
    if left.shape != right.shape:
        return 1.0
    return float((np.abs(left - right) > 0.1).any(axis=-1).mean())


def test_the_paper_figures_are_indexed() -> None:
    assert {"speedup_mat", "categories", "accept_hist", "retrieval"} <= set(ENTRIES)
    for name in ENTRIES:
        assert (INDEX.parent / f"{name}.png").is_file(), f"{name}.png is indexed but missing"


@pytest.mark.parametrize("sources", sorted({tuple(e["results"]) for e in ENTRIES.values()}))
def test_figures_match_their_committed_records(sources, tmp_path, monkeypatch) -> None:
    for source in sources:
        assert source.startswith("results/curated/"), f"{source} is not committed"
        assert (REPO / source).is_dir(), f"{source} is missing"
    names = sorted(n for n, e in ENTRIES.items() if tuple(e["results"]) == sources)
    dpi = {ENTRIES[n]["dpi"] for n in names}.pop()
    monkeypatch.chdir(REPO)
    load_script("make_figures").main(
        ["--results", *sources, "--out", str(tmp_path), "--formats", "png", "--dpi", str(dpi),
         "--only", *names]
    )  # fmt: skip
    for name in names:
        share = changed_share(tmp_path / f"{name}.png", INDEX.parent / f"{name}.png")
        assert share <= MAX_CHANGED_PIXELS, f"{name}.png drifted ({share:.1%} of pixels)"
