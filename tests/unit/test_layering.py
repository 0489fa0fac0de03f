"""Imports only point down. ``racer_bench/`` is a stack of folders (:data:`LAYERS`, lowest
first); a module may import its own folder and the folders below it, never one above, and never
``methods/`` or ``scripts/``. Between folders, imports sit at the top of a module, where a reader
sees them: an import inside a function that reaches another folder of the package hides an arrow
(often a circle), so it fails too. Optional third-party packages (vLLM) are not checked here.
Checked on the source: every import statement, also inside functions."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
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
    ("record",),
    ("analysis",),
    ("replay",),
    ("train",),
    ("run",),
    ("bench",),
    ("vllm_backend", "llamacpp"),
    ("cli", "reproduce", "sittings", "__main__", "__init__"),
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


def module_graph(package: Path = PACKAGE, root: Path = REPO) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (every import statement, ``TYPE_CHECKING``
    blocks and function bodies included); ``from a import b`` counts as ``a.b`` where that is a
    module, else as ``a``."""
    modules = {module_name(p, root).removesuffix(".__init__") for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        own = module_name(path, root).removesuffix(".__init__")
        graph[own] = {name for name, _ in imported(path, root) if name in modules} - {own}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_between_modules() -> None:
    """Not even through a ``TYPE_CHECKING`` import or an import inside a function."""
    assert cycles(module_graph()) == []


def test_the_cycle_check_sees_a_type_checking_cycle(tmp_path: Path) -> None:
    engine = tmp_path / "racer_bench" / "engine"
    engine.mkdir(parents=True)
    (engine / "a.py").write_text("from racer_bench.engine import b\n")
    guarded = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
    (engine / "b.py").write_text(guarded + "    from racer_bench.engine import a\n")
    graph = module_graph(tmp_path / "racer_bench", tmp_path)
    assert cycles(graph) == [["racer_bench.engine.a", "racer_bench.engine.b"]]


def test_the_engine_top_level_is_the_loop_and_its_protocols() -> None:
    """Verifiers, scheduling and the fast engine's kernels live in their own subpackages."""
    top = sorted(p.stem for p in (PACKAGE / "engine").glob("*.py") if p.stem != "__init__")
    assert len(top) <= 10, top
    subpackages = {p.name for p in (PACKAGE / "engine").iterdir() if (p / "__init__.py").exists()}
    assert subpackages == {"fast", "schedule", "verify"}


# what a run's life needs; the bench scripts' libraries live in racer_bench/bench/
RUN_LIFE = {"config", "curves", "grid", "manifest", "paired", "prompt", "reference", "resolvers",
            "sitting", "resume", "runlock", "runner", "setup", "startup", "threads"}  # fmt: skip


def test_run_holds_only_the_runs_life() -> None:
    assert {p.stem for p in (PACKAGE / "run").glob("*.py")} - {"__init__"} <= RUN_LIFE


def test_each_bench_library_is_named_after_its_script() -> None:
    libraries = {p.stem for p in (PACKAGE / "bench").glob("*.py")} - {"__init__", "common"}
    scripts = {p.stem for p in (REPO / "scripts").glob("*.py")}
    assert libraries and libraries <= scripts, sorted(libraries - scripts)


@pytest.mark.parametrize(("pattern", "what"), [(r"^\s*class Run\b", "class Run"),
                                                (r"^\s*def mat\(", "def mat(")])  # fmt: skip
def test_one_definition_of_a_run_and_of_mat(pattern: str, what: str) -> None:
    sources = [*PACKAGE.rglob("*.py"), *(REPO / "methods").rglob("*.py"),
               *(REPO / "scripts").glob("*.py"), *(REPO / "tests").rglob("*.py")]  # fmt: skip
    regex = re.compile(pattern, re.M)
    found = [str(p.relative_to(REPO)) for p in sources if regex.search(p.read_text("utf-8"))]
    assert len(found) == 1, f"{what}: {found}"


def test_importing_the_package_registers_no_resolver_and_loads_no_run_layer() -> None:
    code = (
        "import sys; import racer_bench, racer_bench.engine.tree; "
        "from omegaconf import OmegaConf; "
        "assert not OmegaConf.has_resolver('draft_size'), 'resolver registered'; "
        "assert 'racer_bench.run' not in sys.modules, 'run layer loaded'"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
