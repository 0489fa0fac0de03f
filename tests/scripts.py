"""Load ``scripts/<name>.py`` as a module in tests (the scripts folder is not a package)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.conftest import REPO


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` as a module, registered under ``name`` in ``sys.modules``."""
    sys.path.insert(0, str(REPO / "scripts"))
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module
