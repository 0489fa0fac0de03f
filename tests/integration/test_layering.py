"""``methods`` imports ``racer_bench``, never the reverse."""

from __future__ import annotations

import ast

from tests.conftest import REPO


def imported_modules(path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_racer_bench_never_imports_methods():
    offenders = [
        str(path.relative_to(REPO))
        for path in (REPO / "racer_bench").rglob("*.py")
        if any(m == "methods" or m.startswith("methods.") for m in imported_modules(path))
    ]
    assert offenders == []
