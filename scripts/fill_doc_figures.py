"""Rewrite every record-backed figure of the README and docs/*.md from its record.

    python scripts/fill_doc_figures.py            # rewrite the figures in place
    python scripts/fill_doc_figures.py --check    # list stale figures, exit 1 if any

A figure is ``<!-- fig SOURCE EXPR FORMAT -->text<!-- /fig -->`` (racer_bench/analysis/
doc_figures.py says what each part means). Rerun after a curated record is replaced.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def doc_figures() -> ModuleType:
    """The module, loaded from its file: importing the package would load torch, which reading
    JSON does not need."""
    spec = importlib.util.spec_from_file_location(
        "doc_figures", ROOT / "racer_bench" / "analysis" / "doc_figures.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("docs", nargs="*", type=Path, help="documents (default: README, docs/)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root")
    args = parser.parse_args(argv)
    figures = doc_figures()
    root = args.root.resolve()
    docs = [d.resolve() for d in args.docs] or None
    if args.check:
        stale = figures.check(root, docs)
        print("\n".join(stale) or "every figure equals its record")
        return 1 if stale else 0
    changed = figures.rewrite(root, docs)
    print("\n".join(changed) or "nothing to rewrite")
    return 1 if any("cannot resolve" in line for line in changed) else 0


if __name__ == "__main__":
    sys.exit(main())
