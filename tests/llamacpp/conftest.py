"""The tiny random model as a GGUF (written with ``gguf``), known to the llama.cpp package."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from racer_bench.llamacpp import compat
from racer_bench.llamacpp import reference as llamacpp_reference
from racer_bench.models.loaders import tiny_random
from tests.llamacpp.tiny_gguf import write_tiny_gguf

TINY = "racer_bench.models.loaders.tiny_random"


def llama_cpp_missing() -> str | None:
    """Why ``llama_cpp`` does not import here (None: it does)."""
    try:
        import llama_cpp  # noqa: F401
    except Exception as error:  # not installed, or its shared library does not load
        name = type(error).__name__
        return f"llama-cpp-python does not import ({name}: {error}); CI does not build it"
    return None


MISSING = llama_cpp_missing()
needs_llama_cpp = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random model of conf/model/tiny_random.yaml, float32, as a GGUF."""
    return write_tiny_gguf(tiny_random(), tmp_path_factory.mktemp("gguf") / "tiny.gguf")


@pytest.fixture
def tiny_is_gguf(tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``model=tiny_random`` has that GGUF for llama.cpp; ``reference=llamacpp`` is known."""
    monkeypatch.setitem(compat.GGUF_MODELS, TINY, lambda model: tiny_gguf)
    llamacpp_reference.register()
    yield tiny_gguf
