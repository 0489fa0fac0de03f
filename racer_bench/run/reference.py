"""Outside references timed on the run's own prompts: transformers' ``generate()`` and others.

``reference=generate`` adds transformers' ``generate()`` to every prompt of a run, beside the
AR baseline and the method (the order rotates with them), so the summary can say how our AR
loop and the method compare with the library everyone else measures against. It always runs on
the eager engine (the model as transformers ships it): the fast engine replaces the model's
linear layers, so a run whose loop chose the fast engine loads a second, untouched copy.

Other references (``reference=llamacpp``: the same GGUF through llama.cpp) live in packages
above this layer; they :func:`register` a factory, which :func:`build_references` calls while
the run is built. ``reference`` takes one name or a list (``reference=[generate,llamacpp]``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch
from omegaconf import DictConfig, ListConfig

from racer_bench.engine.stopping import StopRule
from racer_bench.engine.target import HFTarget
from racer_bench.errors import ConfigError
from racer_bench.record import folder as records
from racer_bench.tasks.base import Prompt, Task
from racer_bench.tasks.conversation import conversation

REFERENCE = "reference"  # the record's key, beside "baseline" and "method"; others start so
GENERATE = "generate"


class Reference(Protocol):
    """A contender outside our loop: ``key`` names its record (starting with ``reference``)."""

    key: str

    def turns(self, task: Task, prompt: Prompt, max_new_tokens: int) -> list[dict[str, Any]]:
        """Every turn of one prompt, as :func:`reference_turns` gives them."""

    def details(self) -> dict[str, Any]:
        """What the manifest records about it (engine, version, settings)."""


ReferenceFactory = Callable[[DictConfig, HFTarget], Reference]
_FACTORIES: dict[str, ReferenceFactory] = {}


def register(name: str, factory: ReferenceFactory) -> None:
    """Make ``reference=<name>`` build ``factory(cfg, target)`` (cli.py registers llamacpp)."""
    _FACTORIES[name] = factory


def reference_names(cfg: DictConfig) -> list[str]:
    """The references a run asks for, in order (``none`` and an empty list: none)."""
    value = cfg.get("reference", "none")
    names = list(value) if isinstance(value, ListConfig | list | tuple) else [value]
    return [str(n) for n in names if n not in (None, "none")]


def build_references(cfg: DictConfig, target: HFTarget) -> list[Reference]:
    """The references other than ``generate`` (the run's target loads the generate one)."""
    out = []
    for name in reference_names(cfg):
        if name == GENERATE:
            continue
        if name not in _FACTORIES:
            raise ConfigError(f"reference={name}: not available in this entry point "
                              f"(known: {', '.join([GENERATE, *sorted(_FACTORIES)])})")  # fmt: skip
        out.append(_FACTORIES[name](cfg, target))
    return out


def is_reference(key: str) -> bool:
    """Whether a record key holds a reference's turns (no decode steps, no strict pairing)."""
    return key.startswith(REFERENCE)


def hf_generate(
    target: HFTarget,
    ids: list[int],
    max_new_tokens: int,
    stop_strings: Sequence[str] = (),
    **generate_kwargs: Any,
) -> tuple[list[int], float]:
    """Greedy ``model.generate`` on one prompt: (new token ids, seconds incl. prefill).

    ``stop_strings`` end the generation after the token that completes one, as our
    :class:`~racer_bench.engine.stopping.StopRule` does, so both generate the same tokens.
    """
    input_ids = torch.tensor([ids], device=target.device)
    eos = sorted(target.eos_ids)
    if stop_strings:
        generate_kwargs |= {"stop_strings": list(stop_strings), "tokenizer": target.tokenizer}
    target.synchronize()
    start = time.perf_counter()
    with torch.inference_mode():
        out = target.model.generate(
            input_ids,
            attention_mask=torch.ones_like(input_ids),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=eos,
            pad_token_id=eos[0],
            **generate_kwargs,
        )
    target.synchronize()
    return out[0, len(ids) :].tolist(), time.perf_counter() - start


def reference_turns(
    target: HFTarget, task: Task, prompt: Prompt, max_new_tokens: int
) -> list[dict[str, Any]]:
    """Every turn of one prompt through ``generate()``; later turns see its own answers.

    generate() does not split prefill from decode, so a turn keeps one ``wall_time`` (read by
    ``metrics.wall_time``).
    """
    stop = StopRule(target.eos_ids, max_new_tokens, task.stop_strings)  # for its text cut

    def answer(ids: list[int]) -> dict[str, Any]:
        tokens, seconds = hf_generate(target, ids, max_new_tokens, task.stop_strings)
        text = stop.clean_text(target.tokenizer.decode(tokens, skip_special_tokens=True))
        return records.turn_record(tokens, text, "generate", wall_time=seconds)

    return conversation(prompt, task, target.tokenizer, answer)
