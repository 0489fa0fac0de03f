"""When a generation ends: EOS, ``max_new_tokens``, a task stop string. Handled once, here.

The cut is defined on the committed token sequence only (the shortest prefix that hits a
rule), so a method that commits many tokens per step ends exactly where autoregressive
decoding ends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass
class StopRule:
    """Stop rules of one generation call.

    Attributes:
        eos_ids: tokens that end the generation (kept in the output ids, not in the text).
        max_new_tokens: hard cap on generated tokens.
        stop_strings: task stop strings (e.g. ``"\\ndef "`` for HumanEval); the text is cut before
            the first one, the ids after the token that completed it.
        decode: ids -> text, needed when ``stop_strings`` is non-empty.
    """

    eos_ids: set[int]
    max_new_tokens: int
    stop_strings: Sequence[str] = ()
    decode: Callable[[list[int]], str] | None = None

    def cut(self, generated: list[int], new: list[int]) -> tuple[int, str | None]:
        """How many of ``new`` to keep after ``generated``, and why generation ends (or None)."""
        keep, reason = len(new), None
        for j, token in enumerate(new):
            if token in self.eos_ids:
                keep, reason = j + 1, "eos"
                break
        room = self.max_new_tokens - len(generated)
        if keep >= room:
            keep, reason = room, reason if keep == room and reason else "length"
        if self.stop_strings and keep > 0:
            hit = self._first_stop(generated, new[:keep])
            if hit is not None:
                return hit, "stop"
        return keep, reason

    def _first_stop(self, generated: list[int], new: list[int]) -> int | None:
        """Smallest j such that the text of ``generated + new[:j]`` contains a stop string."""
        assert self.decode is not None, "stop strings need a decode function"
        if not self._contains_stop(self.decode(generated + new)):
            return None
        for j in range(1, len(new) + 1):
            if self._contains_stop(self.decode(generated + new[:j])):
                return j
        return None  # pragma: no cover - the full text matched, so some prefix must

    def _contains_stop(self, text: str) -> bool:
        return any(s in text for s in self.stop_strings)

    def clean_text(self, text: str) -> str:
        """Text cut before the first stop string."""
        cut = min((i for s in self.stop_strings if (i := text.find(s)) >= 0), default=len(text))
        return text[:cut]
