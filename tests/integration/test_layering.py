"""Where vLLM itself may be imported (the package's own layering: tests/unit/test_layering.py)."""

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


def offenders(folder: str, banned: tuple[str, ...]) -> list[str]:
    """Files under ``racer_bench/<folder>`` importing a module under one of ``banned``."""
    return [
        str(path.relative_to(REPO))
        for path in (REPO / "racer_bench" / folder).rglob("*.py")
        if any(m == b or m.startswith(f"{b}.") for m in imported_modules(path) for b in banned)
    ]


def test_the_native_engine_imports_neither_vllm_nor_the_layers_above_it():
    assert offenders("engine", ("vllm",)) == []  # the package's own arrows: tests/unit


def test_only_the_vllm_backends_engine_modules_import_vllm():
    # the offline engines, the plugin, the serving sweep's load generator, the step profiler
    allowed = {f"racer_bench/vllm_backend/{name}.py"
               for name in ("offline", "plugin", "serving", "step_profile")}  # fmt: skip
    importing = set(offenders("", ("vllm",)))
    assert importing <= allowed
