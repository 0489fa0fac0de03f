"""An n-gram -> continuation table over the committed context (LogitSpec's "Pool").

Reference: smart-lty/LogitSpec ``model/logitspec/generate_drafts_util.py`` (``Pool``). For every
start position ``i`` and every ``n`` in ``1..max_ngram_size`` with at least one following token,
the key ``tokens[i:i+n]`` maps to ``tokens[i+n : i+n+num_pred_tokens]``. A key is (re)written
only when it is new or the new continuation is at least as long as the stored one, so a later
occurrence wins at equal length, while a short very recent occurrence does not replace an older
full-length one until it has grown. The n-gram ending at the last token is never a key (it has no
continuation), so a lookup never matches itself.

Deviation: the reference rescans start positions ``len - 2 * num_pred_tokens ..`` after each
append, and with fewer tokens than that it indexes from a negative start (Python wraps around and
inserts bogus keys). Here the rescan starts at ``max(0, min(len - 2 * num_pred_tokens,
old_len - num_pred_tokens - max_ngram_size + 1))``, which covers every key whose continuation
changed, so the table always equals a full rebuild over the same tokens (tested).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Continuation = tuple[int, ...]


class NgramIndex:
    """Longest-suffix n-gram lookup with an incremental update.

    Args:
        max_ngram_size: longest key length N (keys of every length 1..N are stored).
        num_pred_tokens: maximum stored continuation length.
    """

    def __init__(self, max_ngram_size: int = 3, num_pred_tokens: int = 20) -> None:
        if max_ngram_size < 1 or num_pred_tokens < 1:
            raise ValueError("max_ngram_size and num_pred_tokens must be >= 1")
        self.max_ngram_size = max_ngram_size
        self.num_pred_tokens = num_pred_tokens
        self.tokens: list[int] = []
        # One dict for all n: tuples of different lengths never collide.
        self.table: dict[Continuation, Continuation] = {}

    def __len__(self) -> int:
        return len(self.table)

    def build(self, tokens: Iterable[int]) -> None:
        """Index ``tokens`` from scratch."""
        self.tokens = [int(t) for t in tokens]
        self.table = {}
        self._scan(0)

    def extend(self, new_tokens: Iterable[int]) -> None:
        """Append tokens and rescan only the start positions whose continuation changed."""
        old_len = len(self.tokens)
        self.tokens.extend(int(t) for t in new_tokens)
        window = len(self.tokens) - 2 * self.num_pred_tokens
        changed = old_len - self.num_pred_tokens - self.max_ngram_size + 1
        self._scan(max(0, min(window, changed)))

    def _scan(self, start: int) -> None:
        """Apply the insertion rule to every key starting at ``start`` or later, in order."""
        toks, table = self.tokens, self.table
        length, num_pred = len(toks), self.num_pred_tokens
        for i in range(start, length - 1):
            for end in range(i + 1, min(i + self.max_ngram_size, length - 1) + 1):
                key = tuple(toks[i:end])
                old = table.get(key)
                if old is None or min(num_pred, length - end) >= len(old):
                    table[key] = tuple(toks[end : end + num_pred])

    def lookup(self, context: Sequence[int], extra: int | None = None) -> Continuation:
        """Continuation of the longest suffix n-gram of ``context`` (+ ``extra``); () if none.

        Args:
            context: token sequence whose suffix is looked up (usually committed tokens).
            extra: optional token treated as appended to ``context`` (a guessed next token),
                which avoids copying the context.
        """
        table = self.table
        if extra is None:
            for n in range(min(self.max_ngram_size, len(context)), 0, -1):
                found = table.get(tuple(context[len(context) - n :]))
                if found is not None:
                    return found
            return ()
        for n in range(min(self.max_ngram_size, len(context) + 1), 0, -1):
            key = (*context[len(context) - n + 1 :], extra) if n > 1 else (extra,)
            found = table.get(key)
            if found is not None:
                return found
        return ()
