"""Self-distillation data for model-based drafters: the target's own greedy answers.

Prompts come from :mod:`racer_bench.train.distill_prompts` (disjoint from every evaluation set). The
target's greedy continuations are generated in batches and appended, one JSON line per prompt,
to a cache file (``data.cache``) right after each batch: an interrupted build loses at most one
batch, a rerun generates only the prompts the cache lacks, and every head trained later reuses
the same lines. A line is keyed by the model name, the continuation length and the rendered
prompt ids, so changing any of them never reuses a stale continuation.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

import torch

from racer_bench.errors import ConfigError
from racer_bench.train.distill_prompts import DistillPrompt


def render(tokenizer: Any, prompt: DistillPrompt) -> list[int]:
    """Token ids of a prompt's messages: the chat template, or plain lines without one."""
    messages = [{"role": role, "content": text} for role, text in prompt.messages]
    if not getattr(tokenizer, "chat_template", None):
        text = "\n\n".join(m["content"] for m in messages) + "\n"
        return tokenizer.encode(text, add_special_tokens=True)
    chat = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer.encode(chat, add_special_tokens=False)


def cache_key(model: str, max_new_tokens: int, prompt_ids: list[int]) -> str:
    """Identity of one continuation in the cache."""
    raw = json.dumps([model, max_new_tokens, prompt_ids]).encode()
    return hashlib.sha1(raw).hexdigest()


def read_cache(path: Path) -> dict[str, dict[str, Any]]:
    """key -> record of every complete line (a torn last line is ignored)."""
    records: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return records
    with path.open(encoding="utf-8") as f:
        for line in f:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            records[row["key"]] = row
    return records


def append_cache(path: Path, rows: list[dict[str, Any]]) -> None:
    """Append complete lines and flush them to disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        if f.tell() > 0:
            f.write("\n")  # ends a torn line (if any) so the new rows parse
        f.write("\n".join(json.dumps(r) for r in rows) + "\n")
        f.flush()
        os.fsync(f.fileno())


@torch.inference_mode()
def greedy_continuations(
    model: Any, prompts: list[list[int]], max_new_tokens: int, eos_ids: set[int]
) -> list[list[int]]:
    """Greedy continuations of a batch of prompts (left padding, KV cache), EOS included."""
    width = max(len(p) for p in prompts)
    pad = next(iter(eos_ids), 0)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    out = model.generate(
        input_ids=ids.to(model.device),
        attention_mask=mask.to(model.device),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        pad_token_id=pad,
        eos_token_id=sorted(eos_ids) or None,
    )
    new = out[:, width:].tolist()
    return [_cut_at_eos(row, eos_ids) for row in new]


def _cut_at_eos(row: list[int], eos_ids: set[int]) -> list[int]:
    for i, t in enumerate(row):
        if t in eos_ids:
            return row[: i + 1]
    return row


def build_dataset(
    target: Any, prompts: list[DistillPrompt], max_new_tokens: int, batch_size: int,
    cache: Path, progress: bool = True, generate: bool = True, shard: tuple[int, int] = (0, 1),
) -> dict[str, Any]:  # fmt: skip
    """Generate what the cache lacks (appending after every batch), then assemble the dataset.

    With ``generate=False`` nothing is generated. ``shard=(i, n)`` generates only the missing
    prompts whose key hashes to i modulo n, so n processes (one thread each, faster on a CPU
    than one process with n threads) split the work the same way whenever they start. The
    dataset holds the prompts the cache has when generation ends (all of them unless generation
    was off or another shard is still running).

    Returns ``sequences`` (prompt + continuation ids), ``prompt_lens``, ``sources``, ``keys``
    in prompt order, plus ``generated`` (continuations made by this call).
    """
    from tqdm import tqdm

    index, count = shard
    if not 0 <= index < count:
        raise ConfigError(
            f"data.shard_index: {index} is not in 0..{count - 1} (data.shard_count={count})"
        )
    ids = [render(target.tokenizer, p) for p in prompts]
    keys = [cache_key(target.name, max_new_tokens, x) for x in ids]
    done = read_cache(cache)
    todo = sorted({k: i for i, k in enumerate(keys) if k not in done}.values(),
                  key=lambda i: len(ids[i]))  # fmt: skip  # similar lengths: less padding
    todo = [i for i in todo if int(keys[i], 16) % count == index] if generate else []
    batches = [todo[i : i + batch_size] for i in range(0, len(todo), batch_size)]
    for batch in tqdm(batches, desc="distill", unit="batch", disable=not progress):
        outs = greedy_continuations(
            target.model, [ids[i] for i in batch], max_new_tokens, target.eos_ids
        )
        rows = [{"key": keys[i], "source": prompts[i].source, "prompt_ids": ids[i],
                 "new_ids": new} for i, new in zip(batch, outs, strict=True)]  # fmt: skip
        append_cache(cache, rows)
        done.update((r["key"], r) for r in rows)
    if count > 1 and generate:  # rows other shards appended meanwhile
        done.update((k, r) for k, r in read_cache(cache).items() if k not in done)
    have = [i for i, k in enumerate(keys) if k in done]
    prompts, ids, keys = [prompts[i] for i in have], [ids[i] for i in have], [keys[i] for i in have]
    return {
        "sequences": [ids[i] + done[k]["new_ids"] for i, k in enumerate(keys)],
        "prompt_lens": [len(x) for x in ids],
        "sources": [p.source for p in prompts],
        "keys": keys,
        "generated": len(todo),
        "model": target.name,
        "max_new_tokens": max_new_tokens,
    }


def holdout_mask(keys: list[str], fraction: float) -> list[bool]:
    """True for the ``ceil(fraction * n)`` sequences whose keys hash lowest (deterministic)."""
    count = math.ceil(fraction * len(keys)) if fraction > 0 else 0
    ranked = sorted(range(len(keys)), key=lambda i: hashlib.sha1(keys[i].encode()).hexdigest())
    held = set(ranked[:count])
    return [i in held for i in range(len(keys))]
