"""What a lossy verifier changed on one prompt, measured where the target and task are loaded.

After every mode has answered a prompt (:func:`racer_bench.run.runner.run_prompt`), for each mode
paired with strict greedy (``method``, or a grid's ``point<i>``):

* every turn of every mode gets ``target_logprob``: the summed log-probability of its tokens
  under the target, teacher-forced on that mode's own context
  (:func:`racer_bench.engine.likelihood.output_logprobs`, one forward per distinct output);
* the record gets ``agreement`` (``<mode>_agreement`` for other modes): 1.0 / 0.0 when the
  task's extracted final answer equals strict greedy's (:meth:`Task.agreement`), None where the
  task has none.

The summaries read these values back from the records (:mod:`racer_bench.analysis.quality`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from racer_bench.analysis.quality import LOGPROB_KEY
from racer_bench.engine.likelihood import output_logprobs
from racer_bench.engine.target import HFTarget
from racer_bench.run.reference import is_reference
from racer_bench.tasks.base import Prompt, Task

STRICT = "strict"


def agreement_key(mode: str) -> str:
    """``agreement`` for the run's own method, ``<mode>_agreement`` for a grid point."""
    return "agreement" if mode == "method" else f"{mode}_agreement"


def contexts(task: Task, target: HFTarget, prompt: Prompt, turns: list[dict]) -> list[list[int]]:
    """The prompt ids each turn was generated from (later turns see the mode's own answers)."""
    texts = [t["text"] for t in turns]
    return [task.render(prompt, i, texts[:i], target.tokenizer) for i in range(len(turns))]


def add_logprobs(target: HFTarget, task: Task, prompt: Prompt, record: dict[str, Any],
                 modes: Sequence[str]) -> None:  # fmt: skip
    """Store ``target_logprob`` in every turn of ``modes`` and strict's (one batched pass)."""
    places, pairs = [], []
    for mode in [*modes, STRICT]:
        turns = record[mode]["turns"]
        for turn, ids in zip(turns, contexts(task, target, prompt, turns), strict=True):
            places.append(turn)
            pairs.append((ids, turn["tokens"]))
    for turn, value in zip(places, output_logprobs(target, pairs), strict=True):
        turn[LOGPROB_KEY] = value


def add_agreement(target: HFTarget, task: Task, prompt: Prompt, record: dict[str, Any],
                  modes: Sequence[str]) -> None:  # fmt: skip
    """Store each mode's answer agreement with strict greedy (None where not measurable)."""
    reference = [t["text"] for t in record[STRICT]["turns"]]
    for mode in modes:
        texts = [t["text"] for t in record[mode]["turns"]]
        record[agreement_key(mode)] = task.agreement(prompt, texts, reference)


def compare_with_strict(target: HFTarget, task: Task, prompt: Prompt,
                        record: dict[str, Any]) -> None:  # fmt: skip
    """Both measures for every mode of ``record`` paired with strict (no-op without strict).

    A measure that raises is left out of the record (the prompt's generations are kept) and
    its error is kept under ``quality_error``; the summaries then count it as not measured.
    """
    if STRICT not in record:
        return
    lossy = [m for m in record if isinstance(record[m], dict) and "turns" in record[m]]
    lossy = [m for m in lossy if m not in (STRICT, "baseline") and not is_reference(m)]
    errors = []
    for measure in (add_logprobs, add_agreement):
        try:
            measure(target, task, prompt, record, lossy)
        except (KeyboardInterrupt, MemoryError):
            raise
        except Exception as error:  # a measure must not cost the prompt its timed decodes
            errors.append(f"{measure.__name__}: {type(error).__name__}: {error}")
    if errors:
        record["quality_error"] = "; ".join(errors)
