"""Tables name, order and size a method from its YAML: a new method needs no edit in analysis/."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from omegaconf import OmegaConf

from racer_bench.analysis import frames
from racer_bench.config import paths as configs
from tests.conftest import CONF_DIR, REPO
from tests.scripts import load_script
from tests.unit.test_frames import write_run

TOY = """_target_: racer_bench.engine.drafter.NullDrafter
display_name: Toy Drafter
display_order: -1
size_key: width
_partial_: true
width: 4
"""


def test_a_new_method_yaml_names_and_sizes_it_in_tables(tmp_path: Path, monkeypatch) -> None:
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    (conf / "method" / "toy.yaml").write_text(TOY)
    monkeypatch.setattr(configs, "CONF_DIR", conf)
    results = tmp_path / "results"
    write_run(results, "pld", "pld", "humaneval", ("humaneval",), 4)
    write_run(results, "toy", "toy", "humaneval", ("humaneval",), 4, method_cfg={"width": 4})
    runs_df = frames.runs_frame(frames.load_runs(results))
    assert list(runs_df["label"]) == ["Toy Drafter", "PLD"]  # display_order -1 comes first
    assert runs_df.loc[0, "capacity"] == 4 and runs_df.loc[0, "family"] == "Toy Drafter"
    out = tmp_path / "tables.md"
    load_script("make_tables").main(["--results", str(results), "--out", str(out), "--no-paper"])
    rows = [line for line in out.read_text().splitlines() if line.startswith("| ")]
    assert any(row.startswith("| Toy Drafter |") for row in rows), rows


def method_names() -> set[str]:
    """Every method's config name and display name."""
    out = set()
    for path in (CONF_DIR / "method").glob("*.yaml"):
        out |= {path.stem, str(OmegaConf.load(path).get("display_name") or path.stem)}
    return out


def test_no_analysis_module_names_a_method() -> None:
    """The results side shows methods by their YAML's display keys. Only the paper tables
    (``analysis/tables/``) name methods: they regenerate the papers' tables, whose rows and
    reported columns are those papers' methods (RACER's ablation, LogitSpec's table)."""
    methods = method_names()
    analysis = REPO / "racer_bench" / "analysis"
    found = [
        f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}"
        for path in sorted(analysis.rglob("*.py"))
        if not path.is_relative_to(analysis / "tables")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and node.value in methods
    ]
    assert found == []
