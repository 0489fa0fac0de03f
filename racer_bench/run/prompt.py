"""One prompt, every contender back to back: the AR baseline, the method (and strict greedy
for a lossy verifier) through our decode loop, ``generate()`` with a reference; the order
rotates with the prompt index so drift hits all alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from racer_bench.analysis.metrics import calibration_bins
from racer_bench.engine.decode import generate
from racer_bench.engine.stopping import StopRule
from racer_bench.engine.structs import GenerationResult
from racer_bench.errors import ConfigError
from racer_bench.record import folder as records
from racer_bench.run.paired import compare_with_strict
from racer_bench.run.reference import REFERENCE, is_reference, reference_turns
from racer_bench.run.setup import Mode, Setup
from racer_bench.tasks.base import Prompt
from racer_bench.tasks.conversation import conversation


def generate_turns(setup: Setup, mode: Mode, prompt: Prompt, seed: int) -> list[dict[str, Any]]:
    """All turns of one prompt; later turns see this mode's own earlier answers."""
    target = setup.target
    rng = torch.Generator().manual_seed(seed)
    stop = StopRule(target.eos_ids, setup.max_new_tokens, setup.task.stop_strings,
                    decode=target.tokenizer.decode)  # fmt: skip

    def answer(ids: list[int]) -> dict[str, Any]:
        result = generate(target, mode.drafter, mode.verifier, ids, stop, rng, setup.options,
                          scheduler=mode.scheduler)  # fmt: skip
        return generation_record(result)

    return conversation(prompt, setup.task, target.tokenizer, answer)


def contenders(
    setup: Setup, index: int, repeat: int = 0
) -> list[tuple[str, Callable[[Prompt], list[dict[str, Any]]]]]:
    """Record key and turn generator of every mode (and of each reference: ``generate()``,
    llama.cpp), in the order prompt ``index`` runs them: shifted by the index (and the repeat),
    so drift hits all alike (two contenders alternate); a repeat keeps the prompt's seed."""
    seed = setup.cfg.seed + index
    out: list[tuple[str, Callable[[Prompt], list[dict[str, Any]]]]] = [
        (m.name, lambda p, m=m: generate_turns(setup, m, p, seed)) for m in setup.modes
    ]
    if setup.reference is not None:
        ref = setup.reference
        out.append((REFERENCE, lambda p: reference_turns(ref, setup.task, p, setup.max_new_tokens)))
    for other in setup.references:
        out.append((other.key, lambda p, o=other: o.turns(setup.task, p, setup.max_new_tokens)))
    shift = (index + repeat) % len(out)  # over len(out) prompts, each contender in each place
    return [*out[shift:], *out[:shift]]


def run_prompt(setup: Setup, prompt: Prompt, index: int, repeat: int = 0) -> dict[str, Any]:
    """Every mode on one prompt, back to back; the order alternates with the prompt index.

    With a strict-greedy mode, each lossy mode's answer agreement and every output's target
    log-probability follow (:mod:`racer_bench.run.paired`), after all timed decoding.
    """
    record = prompt_head(prompt, index, repeat)
    for name, turns_of in contenders(setup, index, repeat):
        record[name] = {"turns": turns_of(prompt)}
    for mode in setup.modes:
        texts = [t["text"] for t in record[mode.name]["turns"]]
        key = "score" if mode.name == "method" else f"{mode.name}_score"
        record[key] = setup.task.score(prompt, texts)
    compare_with_strict(setup.target, setup.task, prompt, record)  # lossy verifiers only
    if "baseline" in record and "method" in record:
        record["identical"] = [t["tokens"] for t in record["method"]["turns"]] == [
            t["tokens"] for t in record["baseline"]["turns"]
        ]
    record["status"] = "ok"
    return record


def prompt_head(prompt: Prompt, index: int, repeat: int) -> dict[str, Any]:
    """The keys every prompt line starts with; a repeat after the first has its own id
    (:func:`racer_bench.record.folder.repeat_id`) and says which repeat it is."""
    head: dict[str, Any] = {"id": records.repeat_id(prompt.id, repeat), "category": prompt.category,
                            "index": index}  # fmt: skip
    return head | {"repeat": repeat} if repeat else head


def failed_record(
    prompt: Prompt, index: int, error: BaseException, repeat: int = 0
) -> dict[str, Any]:
    """A prompt that raised: recorded as failed with its error, never as a fake answer."""
    message = f"{type(error).__name__}: {error}"
    return prompt_head(prompt, index, repeat) | {"status": "failed", "error": message}


def safe_run_prompt(setup: Setup, prompt: Prompt, index: int, repeat: int = 0) -> dict[str, Any]:
    """:func:`run_prompt`, with an exception recorded as a failed prompt (the run goes on)."""
    try:
        return run_prompt(setup, prompt, index, repeat)
    except (KeyboardInterrupt, ConfigError):
        raise
    except Exception as error:
        return failed_record(prompt, index, error, repeat)


def decode_steps(record: dict[str, Any]) -> int:
    """Decode steps of every mode of one prompt record (0 for a failed prompt); the references
    (``generate()``, llama.cpp) keep no steps."""
    return sum(
        len(turn["steps"]["n_draft"])
        for name, mode in record.items()
        if not is_reference(name) and isinstance(mode, dict) and "turns" in mode
        for turn in mode["turns"]
    )


def generation_record(result: GenerationResult) -> dict[str, Any]:
    """A JSON-ready turn of our decode loop, with the calibration bins of a scheduled run."""
    record = records.turn_record(result.tokens, result.text, result.stop_reason,
                         prefill_time=result.prefill_time, decode_time=result.decode_time,
                         steps=records.step_columns_of(result.steps))  # fmt: skip
    pairs = [pair for s in result.steps for pair in s.calibration]
    if pairs:
        record["calibration"] = calibration_bins(pairs)
    return record
