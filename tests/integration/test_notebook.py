"""The exploration notebook: committed without outputs, and it runs on a small results folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.unit.test_frames import SPEC_CATEGORIES, write_run

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK = REPO / "notebooks" / "explore_results.ipynb"


def test_notebook_is_committed_without_outputs() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, "the notebook has no code"
    assert all(c.outputs == [] and c.execution_count is None for c in code)


def test_notebook_runs_on_a_results_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = tmp_path / "results"
    write_run(results, "pld", "pld", "spec_bench", SPEC_CATEGORIES, 8, accept=0.5)
    write_run(results, "racer", "racer", "spec_bench", SPEC_CATEGORIES, 8, accept=1.5, ranks=True)
    write_run(results, "racer_he", "racer", "humaneval", ("humaneval",), 3, ranks=True)
    monkeypatch.setenv("RACER_BENCH_RESULTS", str(results))  # the kernel inherits the env
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs)
    assert f"3 runs under {results}" in text
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 5  # speedup_mat, categories, accept_hist, retrieval, ranks (+ by hand)
