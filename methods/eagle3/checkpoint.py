"""EAGLE-3 checkpoints: trained here (a file) or published (a SafeAILab/SpecForge folder)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from methods.common.heads.checkpoint import load_checkpoint
from methods.eagle3.head import Eagle3Head, eagle3_config
from racer_bench.errors import ConfigError


def load_eagle3(path: str, embed_from: str | None = None) -> Eagle3Head:
    """An EAGLE-3 head from a checkpoint trained here (file) or a published one (folder)."""
    file = Path(path).expanduser()
    if file.is_dir():
        cfg, state = published_eagle3(file, embed_from)
    else:
        data = load_checkpoint(path, "eagle3")
        cfg, state = data["config"], data["state"]
    head = Eagle3Head(cfg, state["draft_ids"])
    head.load_state_dict(state)
    return head


def published_eagle3(folder: Path, embed_from: str | None) -> tuple[dict[str, Any], dict]:
    """Config and mapped state dict of a published EAGLE-3 folder (SafeAILab/SpecForge)."""
    raw = json.loads((folder / "config.json").read_text())
    state = map_eagle3_state(_read_weights(folder))
    if "embed_tokens.weight" not in state:
        if embed_from is None:
            raise ConfigError(
                f"method.checkpoint={folder}: no embed_tokens; set method.embed_from to the "
                "target model folder (its embedding matrix is shared)"
            )
        state["embed_tokens.weight"] = _embedding(Path(embed_from).expanduser())
    hidden = int(raw["hidden_size"])
    cfg = eagle3_config(
        hidden, int(state["fc.weight"].shape[1]), int(state["embed_tokens.weight"].shape[0]),
        num_heads=int(raw["num_attention_heads"]),
        num_kv_heads=int(raw.get("num_key_value_heads", raw["num_attention_heads"])),
        intermediate_size=int(raw["intermediate_size"]),
        rope_theta=float(raw.get("rope_theta", 10000.0)),
        rms_eps=float(raw.get("rms_norm_eps", 1e-6)),
    )  # fmt: skip
    cfg["head_dim"] = int(raw.get("head_dim") or hidden // cfg["num_heads"])
    return cfg, state


def map_eagle3_state(raw: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Published EAGLE-3 weight names -> :class:`Eagle3Head` names.

    ``model.`` prefixes are dropped, ``layers.0.`` becomes ``midlayer.``, ``d2t`` offsets
    (target id = draft id + d2t) become absolute ``draft_ids``, and ``t2d`` is dropped.
    """
    state: dict[str, torch.Tensor] = {}
    for name, tensor in raw.items():
        key = name.removeprefix("model.")
        key = "midlayer." + key.removeprefix("layers.0.") if key.startswith("layers.0.") else key
        if key == "t2d":
            continue
        if key == "d2t":
            state["draft_ids"] = torch.arange(len(tensor)) + tensor.long()
            continue
        state[key] = tensor.float()
    if "draft_ids" not in state:  # full-vocabulary head
        state["draft_ids"] = torch.arange(state["lm_head.weight"].shape[0])
    return state


def _read_weights(folder: Path) -> dict[str, torch.Tensor]:
    files = sorted(folder.glob("*.safetensors"))
    if files:
        from safetensors.torch import load_file

        out: dict[str, torch.Tensor] = {}
        for f in files:
            out.update(load_file(str(f)))
        return out
    bin_file = folder / "pytorch_model.bin"
    if not bin_file.exists():
        raise ConfigError(f"method.checkpoint={folder}: no *.safetensors or pytorch_model.bin")
    return torch.load(bin_file, map_location="cpu", weights_only=True)


def _embedding(folder: Path) -> torch.Tensor:
    """The ``embed_tokens`` matrix of a target model folder (safetensors)."""
    from safetensors import safe_open

    for f in sorted(folder.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as handle:
            for key in handle.keys():  # noqa: SIM118 -- safe_open has no __iter__
                if key.endswith("embed_tokens.weight"):
                    return handle.get_tensor(key).float()
    raise ConfigError(f"method.embed_from={folder}: no embed_tokens.weight in *.safetensors")
