"""The README's map of the tree names every folder, config group, module and script.

The map is the code block under "## How it is built". It is indented like a tree: a top-level
folder's section starts with ``name/`` at column 0 and runs to the next line that starts at
column 0. Inside the ``racer_bench/`` section, a line whose text starts at the section's text
column with ``sub/`` opens that subpackage's entry, which runs over the more deeply indented
lines below it; the other lines of the section describe the top-level modules.

Matching rule: a thing counts as named when its name (a module's or script's file stem, a
config group's or subpackage's folder name) appears as a whole word, not inside a longer
identifier, in its own part of the map: config groups in ``conf/``, scripts in ``scripts/``,
a subpackage's modules (and those of packages nested in it) in that subpackage's entry, the
top-level modules in ``racer_bench/`` outside the subpackage entries.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

from tests.conftest import REPO

HEADING = "## How it is built"
# The folders the map has always described; any other top-level folder git tracks joins them.
LAYOUT = ("conf", "racer_bench", "methods", "scripts", "results", "notebooks", "docs", "tests")
NOT_MODULES = {"__init__", "__main__"}


def map_block() -> list[str]:
    """The lines of the first code block after the map heading."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert HEADING in readme, f"README has no '{HEADING}' section"
    after = readme.split(HEADING, 1)[1]
    return after.split("```", 2)[1].split("\n")[1:]


def sections(lines: list[str]) -> dict[str, list[str]]:
    """Top-level folder (``name`` of ``name/`` at column 0) -> its lines, the name blanked."""
    out: dict[str, list[str]] = {}
    current: list[str] = []
    for line in lines:
        if line[:1].strip():
            head = line.split()[0]
            current = out.setdefault(head.rstrip("/"), [])
            line = " " * len(head) + line[len(head) :]
        current.append(line)
    return out


def entries(section: list[str]) -> dict[str, list[str]]:
    """A section's subpackage entries (``sub`` -> lines) and its other lines (key ``""``)."""
    column = len(section[0]) - len(section[0].lstrip()) if section else 0
    out: dict[str, list[str]] = {"": []}
    key = ""
    for line in section:
        indent = len(line) - len(line.lstrip())
        if line.strip() and indent <= column:
            first = line.split()[0]
            key = first.rstrip("/") if first.endswith("/") else ""
            out.setdefault(key, [])
        out[key].append(line)
    return out


def missing(names: Iterable[str], lines: list[str]) -> list[str]:
    """The names that do not appear as a whole word in the lines."""
    text = "\n".join(lines)
    return sorted(n for n in names if not re.search(rf"(?<!\w){re.escape(n)}(?!\w)", text))


def tracked_folders() -> set[str]:
    """Top-level, not hidden folders holding a file git tracks (none without git)."""
    try:
        out = subprocess.run(
            ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return set()
    folders = {path.split("/", 1)[0] for path in out.splitlines() if "/" in path}
    return {name for name in folders if not name.startswith(".")}


def subpackages(package: Path) -> list[str]:
    """The folders directly under a package that are packages themselves."""
    return sorted(p.name for p in package.iterdir() if (p / "__init__.py").is_file())


def test_every_top_level_folder_has_a_section() -> None:
    folders = {name for name in LAYOUT if (REPO / name).is_dir()} | tracked_folders()
    absent = sorted(f"{name}/" for name in folders - set(sections(map_block())))
    assert not absent, f"README's map has no section for {absent}"


def test_every_config_group_is_named() -> None:
    groups = [p.name for p in (REPO / "conf").iterdir() if p.is_dir()]
    absent = missing(groups, sections(map_block()).get("conf", []))
    assert not absent, f"README's map (conf/) misses the config groups {absent}"


def test_every_script_is_named() -> None:
    scripts = [p.stem for p in (REPO / "scripts").glob("*.py")]
    absent = missing(scripts, sections(map_block()).get("scripts", []))
    assert not absent, f"README's map (scripts/) misses {[f'{s}.py' for s in absent]}"


def test_every_subpackage_has_an_entry() -> None:
    parts = entries(sections(map_block()).get("racer_bench", []))
    absent = [f"{sub}/" for sub in subpackages(REPO / "racer_bench") if sub not in parts]
    assert not absent, f"README's map (racer_bench/) has no entry for {absent}"


def test_every_module_and_subpackage_is_named_in_its_entry() -> None:
    package = REPO / "racer_bench"
    parts = entries(sections(map_block()).get("racer_bench", []))
    wanted: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        relative = path.relative_to(package)
        key = relative.parts[0] if len(relative.parts) > 1 else ""
        names = wanted.setdefault(key, set())
        names.update(relative.parts[1:-1])  # nested subpackages
        if path.stem not in NOT_MODULES:
            names.add(path.stem)
    absent = [
        f"racer_bench/{key + '/' if key else ''}{name}"
        for key, names in sorted(wanted.items())
        for name in missing(names, parts.get(key, []))
    ]
    assert not absent, f"README's map misses these modules or subpackages: {absent}"
