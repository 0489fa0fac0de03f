"""A GGUF of the tiny random test model, written with the ``gguf`` package: the same weights as
:func:`racer_bench.models.loaders.tiny_random` (float32), a 260-token byte vocabulary, so
llama.cpp runs the model our loop runs and the tests need no download."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import torch

from racer_bench.engine.target import HFTarget

BYTE, CONTROL, UNKNOWN = 6, 3, 2  # gguf token types


def permute(weight: np.ndarray, heads: int) -> np.ndarray:
    """Q/K rows from transformers' rotate-half order to llama.cpp's interleaved rope order."""
    rows = weight.shape[0]
    return weight.reshape(heads, 2, rows // heads // 2, -1).swapaxes(1, 2).reshape(weight.shape)


def vocabulary(writer: gguf.GGUFWriter, size: int) -> None:
    """Bytes 0-255 as ``<0xXX>`` byte tokens, then BOS, EOS and spare specials (a SPM vocab)."""
    tokens = [f"<0x{b:02X}>".encode() for b in range(256)]
    tokens += [b"<s>", b"</s>", b"<pad>"] + [f"<extra{i}>".encode() for i in range(size - 259)]
    types = [BYTE] * 256 + [CONTROL] * (size - 257) + [UNKNOWN]
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * size)
    writer.add_token_types(types)
    writer.add_bos_token_id(256)
    writer.add_eos_token_id(257)
    writer.add_pad_token_id(258)
    writer.add_unk_token_id(size - 1)
    writer.add_add_bos_token(False)


def tensors(target: HFTarget) -> dict[str, np.ndarray]:
    """GGUF tensor name -> float32 array of the model's weights."""
    cfg = target.model.config
    state = {k: v.detach().to(torch.float32).numpy() for k, v in target.model.state_dict().items()}
    out = {"token_embd.weight": state["model.embed_tokens.weight"],
           "output_norm.weight": state["model.norm.weight"],
           "output.weight": state["lm_head.weight"]}  # fmt: skip
    names = {"self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate",
             "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
             "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}  # fmt: skip
    for i in range(cfg.num_hidden_layers):
        hf = f"model.layers.{i}."
        out[f"blk.{i}.attn_q.weight"] = permute(state[hf + "self_attn.q_proj.weight"],
                                                cfg.num_attention_heads)  # fmt: skip
        out[f"blk.{i}.attn_k.weight"] = permute(state[hf + "self_attn.k_proj.weight"],
                                                cfg.num_key_value_heads)  # fmt: skip
        out[f"blk.{i}.attn_v.weight"] = state[hf + "self_attn.v_proj.weight"]
        for ours, theirs in names.items():
            out[f"blk.{i}.{theirs}.weight"] = state[f"{hf}{ours}.weight"]
    return out


def write_tiny_gguf(target: HFTarget, path: Path) -> Path:
    """Write ``target`` (a tiny random Llama) as a float32 GGUF at ``path``."""
    cfg = target.model.config
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny_random")
    writer.add_context_length(int(cfg.max_position_embeddings))
    writer.add_embedding_length(int(cfg.hidden_size))
    writer.add_block_count(int(cfg.num_hidden_layers))
    writer.add_feed_forward_length(int(cfg.intermediate_size))
    writer.add_head_count(int(cfg.num_attention_heads))
    writer.add_head_count_kv(int(cfg.num_key_value_heads))
    writer.add_rope_dimension_count(int(cfg.hidden_size // cfg.num_attention_heads))
    writer.add_rope_freq_base(float(getattr(cfg, "rope_theta", None) or 10000.0))
    writer.add_layer_norm_rms_eps(float(cfg.rms_norm_eps))
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    vocabulary(writer, int(cfg.vocab_size))
    for name, array in tensors(target).items():
        writer.add_tensor(name, np.ascontiguousarray(array, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
