"""Imports only point down: methods/ builds on racer_bench/, the engine on neither the results
side nor the runner. Checked on the source (every import statement, also inside functions)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "racer_bench"


def imported(path: Path, root: Path = REPO) -> set[str]:
    """Every module an import statement of ``path`` names (``from a import b``: a and a.b)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the file's package
                parts = path.relative_to(root).with_suffix("").parts[: -node.level]
                base = ".".join([*parts, base] if base else parts)
            out |= {base, *(f"{base}.{alias.name}" for alias in node.names)}
    return out


def offenders(folder: Path, forbidden: tuple[str, ...], root: Path = REPO) -> list[str]:
    """``file: module`` for each import under ``folder`` of a forbidden module or its children."""
    return [
        f"{path.relative_to(root)}: {name}"
        for path in sorted(folder.rglob("*.py"))
        for name in sorted(imported(path, root))
        if any(name == f or name.startswith(f"{f}.") for f in forbidden)
    ]


@pytest.mark.parametrize(
    ("folder", "forbidden"),
    [
        (PACKAGE, ("methods",)),
        (PACKAGE / "engine", ("racer_bench.analysis", "racer_bench.run.runner", "racer_bench.cli")),
    ],
    ids=["racer_bench-not-methods", "engine-not-analysis-or-runner"],
)
def test_imports_point_down(folder: Path, forbidden: tuple[str, ...]) -> None:
    assert offenders(folder, forbidden) == []


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "loop.py").write_text("def f():\n    from ..analysis import plots\n")
    assert "engine/loop.py: analysis" in offenders(tmp_path / "engine", ("analysis",), tmp_path)
    (tmp_path / "engine" / "loop.py").write_text("def f():\n    from racer_bench import runner\n")
    assert offenders(tmp_path / "engine", ("racer_bench.run.runner",), tmp_path) == [
        "engine/loop.py: racer_bench.run.runner"
    ]
