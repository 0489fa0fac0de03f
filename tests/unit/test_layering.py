"""Imports only point down. ``racer_bench/`` is a stack of folders (:data:`LAYERS`, lowest
first); a module may import its own folder and the folders below it, never one above, and never
``methods/`` or ``scripts/``. Between folders, imports sit at the top of a module, where a reader
sees them: an import inside a function that reaches another folder of the package hides an arrow
(often a circle), so it fails too. Optional third-party packages (vLLM) are not checked here.
Checked on the source: every import statement, also inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "racer_bench"
# lowest first; modules of one entry may import each other
LAYERS: list[tuple[str, ...]] = [
    ("errors", "system"),
    ("config",),
    ("engine",),
    ("models", "tasks"),
    ("analysis",),
    ("train",),
    ("run",),
    ("vllm_backend",),
    ("cli", "reproduce", "__main__", "__init__"),
]


def imported(path: Path, root: Path = REPO) -> list[tuple[str, bool]]:
    """``(module, inside a function)`` for each module an import statement of ``path`` names
    (``from a import b``: a and a.b; relative imports resolved against the file's package)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nested = {
        id(node)
        for fn in ast.walk(tree)
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(fn)
    }
    out: list[tuple[str, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, id(node) in nested) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = path.relative_to(root).with_suffix("").parts[: -node.level]
                base = ".".join([*parts, base] if base else parts)
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            out += [(name, id(node) in nested) for name in names]
    return out


def layer_of(module: str) -> int | None:
    """The layer of a ``racer_bench`` module (None outside the package)."""
    parts = module.split(".")
    if parts[0] != "racer_bench":
        return None
    top = parts[1] if len(parts) > 1 else "__init__"
    for rank, names in enumerate(LAYERS):
        if top in names:
            return rank
    raise AssertionError(f"{module}: its folder is in no layer of LAYERS; add it")


def module_name(path: Path, root: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts)


def violations(package: Path, root: Path = REPO) -> list[str]:
    """Every import that points up, reaches methods/ or scripts/, or crosses folders inside a
    function: ``file: module (why)``."""
    found = []
    for path in sorted(package.rglob("*.py")):
        own = module_name(path, root)
        own_rank, own_top = layer_of(own), own.split(".")[1]
        for name, in_function in imported(path, root):
            if name.split(".")[0] in ("methods", "scripts"):
                found.append(f"{path.relative_to(root)}: {name} (outside the package)")
                continue
            rank = layer_of(name)
            if rank is None or name == "racer_bench":
                continue
            top = name.split(".")[1]
            if rank > own_rank:  # type: ignore[operator]
                found.append(f"{path.relative_to(root)}: {name} (points up)")
            elif in_function and top != own_top:
                found.append(f"{path.relative_to(root)}: {name} (inside a function)")
    return found


def test_imports_point_down_and_sit_at_the_top() -> None:
    assert violations(PACKAGE) == []


def test_every_folder_and_top_level_module_has_a_layer() -> None:
    tops = {p.stem for p in PACKAGE.glob("*.py")} | {
        p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()
    }
    placed = {name for names in LAYERS for name in names}
    assert tops <= placed, f"not in LAYERS: {sorted(tops - placed)}"


def test_the_package_root_keeps_few_loose_modules() -> None:
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(loose) <= 6, loose


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("from racer_bench.run import runner\n", "points up"),
        ("def f():\n    from racer_bench.system import hardware\n", "inside a function"),
        ("import methods.pld\n", "outside the package"),
    ],
)
def test_the_check_sees_each_kind_of_bad_import(tmp_path: Path, source: str, why: str) -> None:
    engine = tmp_path / "racer_bench" / "engine"
    engine.mkdir(parents=True)
    (engine / "loop.py").write_text(source)
    assert [v for v in violations(tmp_path / "racer_bench", tmp_path) if why in v]


def test_the_check_allows_imports_down_and_within_a_folder(tmp_path: Path) -> None:
    engine = tmp_path / "racer_bench" / "engine"
    engine.mkdir(parents=True)
    (engine / "loop.py").write_text(
        "from racer_bench.config import schema\ndef f():\n    from racer_bench.engine import tree\n"
    )
    assert violations(tmp_path / "racer_bench", tmp_path) == []
