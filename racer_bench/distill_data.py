"""Self-distillation data for model-based drafters: prompts disjoint from every evaluation set.

Prompt source (documented in docs/model_drafters.md):

* code -- one prompt per public function of a fixed list of Python standard-library modules:
  its signature with the first paragraph of its docstring, wrapped in the same instruction as
  the HumanEval chat prompt. HumanEval problems are hand-written puzzles, not stdlib functions,
  so no evaluation prompt is reused.
* chat -- short instructions written for this purpose (none taken from Spec-Bench, MT-Bench,
  GSM8K, MATH or MGSM).

The target's own greedy continuations of these prompts form the token dataset (prompt +
continuation per sequence); it is built once and saved with :func:`save_dataset`.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Any

import torch

from racer_bench.tasks.humaneval import INSTRUCTION

STDLIB_MODULES = (
    "bisect", "calendar", "colorsys", "csv", "difflib", "fnmatch", "fractions", "functools",
    "glob", "gzip", "heapq", "html", "ipaddress", "itertools", "json", "keyword", "linecache",
    "mimetypes", "ntpath", "operator", "os.path", "pathlib", "posixpath", "pprint", "quopri",
    "random", "re", "shlex", "shutil", "statistics", "string", "tarfile", "textwrap", "tokenize",
    "urllib.parse", "uu", "uuid", "zipfile", "base64", "binascii", "copy", "dataclasses", "enum",
)  # fmt: skip

CHAT_PROMPTS = (
    "Explain in a few sentences why the sky looks blue during the day.",
    "Give me three tips for keeping a small vegetable garden healthy.",
    "Write a short, friendly email inviting a colleague to a team lunch on Friday.",
    "Summarize the main differences between a list and a tuple in Python.",
    "What are the pros and cons of working from home? Answer with a short list.",
    "Describe how a bicycle gear system works to a ten-year-old.",
    "Suggest a weekend itinerary for a first visit to a mountain town.",
    "Write a haiku about autumn leaves falling in a quiet park.",
    "How do I politely decline an invitation to a party?",
    "Explain what a hash table is and when it is useful.",
    "List five healthy breakfast ideas that take less than ten minutes.",
    "What should I pack for a three-day hiking trip?",
    "Explain the difference between weather and climate.",
    "Write a short story opening about a lighthouse keeper who finds a message in a bottle.",
    "Give a step-by-step guide to brewing a good cup of tea.",
    "What is recursion? Give a simple example in Python.",
    "How can I improve my focus when studying for exams?",
    "Explain how compound interest works with a small numeric example.",
    "Write a product description for a reusable water bottle.",
    "What are good habits for writing readable code?",
    "Describe the water cycle in four steps.",
    "Compare trains and planes for a 500 km trip.",
    "Write a thank-you note to a neighbour who watered my plants.",
    "Explain what an API is using a restaurant analogy.",
    "Give me a simple plan to start running three times a week.",
    "What is the difference between a virus and a bacterium?",
    "Explain how to sort a list of dictionaries by a key in Python.",
    "Write a limerick about a cat who loves boxes.",
    "Describe three ways to reduce household energy use.",
    "Explain what version control is and why teams use it.",
    "How do I make a simple tomato pasta sauce?",
    "Write a short motivational message for someone starting a new job.",
)  # fmt: skip


def stdlib_functions(modules: tuple[str, ...] = STDLIB_MODULES) -> list[tuple[str, str]]:
    """(signature line, first docstring paragraph) of every documented public function."""
    found: list[tuple[str, str]] = []
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name, obj in sorted(vars(module).items()):
            if name.startswith("_") or not inspect.isfunction(obj):
                continue
            doc = inspect.getdoc(obj)
            if not doc or getattr(obj, "__module__", "") != module.__name__:
                continue
            try:
                signature = f"def {name}{inspect.signature(obj)}:"
            except (TypeError, ValueError):
                continue
            found.append((signature, doc.split("\n\n")[0].strip()))
    return found


def code_prompt(signature: str, doc: str) -> str:
    """A HumanEval-style instruction for one stdlib function."""
    body = f'{signature}\n    """{doc}"""\n'
    return INSTRUCTION.format(prompt=body)


def prompt_texts(n_code: int | None = None, n_chat: int | None = None) -> list[str]:
    """The self-distillation prompts: code first, then chat (deterministic order)."""
    code = [code_prompt(s, d) for s, d in stdlib_functions()][:n_code]
    return code + list(CHAT_PROMPTS[:n_chat])


def render(tokenizer: Any, text: str) -> list[int]:
    """Token ids of a single-turn user message, chat template when the model has one."""
    if not getattr(tokenizer, "chat_template", None):
        return tokenizer.encode(text, add_special_tokens=True)
    messages = [{"role": "user", "content": text}]
    chat = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer.encode(chat, add_special_tokens=False)


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
    target: Any, texts: list[str], max_new_tokens: int, batch_size: int, progress: bool = True
) -> dict[str, Any]:
    """Render every prompt, generate greedily with the target, and return the token dataset."""
    from tqdm import tqdm

    prompts = [render(target.tokenizer, t) for t in texts]
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))  # less padding
    sequences: list[list[int]] = [[] for _ in prompts]
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    for batch in tqdm(batches, desc="distill", unit="batch", disable=not progress):
        outs = greedy_continuations(
            target.model, [prompts[i] for i in batch], max_new_tokens, target.eos_ids
        )
        for i, new in zip(batch, outs, strict=True):
            sequences[i] = prompts[i] + new
    return {
        "sequences": sequences,
        "prompt_lens": [len(p) for p in prompts],
        "model": target.name,
        "max_new_tokens": max_new_tokens,
    }


def save_dataset(data: dict[str, Any], path: Path) -> None:
    """Write atomically, so an interrupted build is never mistaken for a finished one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(data, tmp)
    tmp.rename(path)


def load_dataset(path: Path) -> dict[str, Any]:
    """A dataset written by :func:`save_dataset`."""
    return torch.load(path, weights_only=False)
