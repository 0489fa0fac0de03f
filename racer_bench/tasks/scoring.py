"""Answer extraction and scoring for the reasoning tasks (pure functions, no model).

* Numeric answers (GSM8K, MGSM): :func:`extract_final_number` takes the number after the last
  answer marker ("The answer is", "####", "答案是", ...), else the number in the last
  ``\\boxed{}``, else the last number in the text; :func:`numbers_equal` compares exactly as
  rationals (``0.5 == 1/2``, ``1,000 == 1000``, ``18.00 == 18``).
* LaTeX answers (MATH-500): :func:`last_boxed` extracts the content of the last ``\\boxed{}``
  and :func:`math_equal` checks symbolic equivalence with ``math-verify``.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Sequence
from fractions import Fraction

# Phrases that introduce the final answer; the last one in the text wins.
ANSWER_MARKERS: tuple[str, ...] = (
    "the answer is",
    "the final answer is",
    "final answer:",
    "answer:",
    "####",
    "答案是",
    "答案为",
    "答案：",
    "答案:",
)

# A number: optional sign (not after a digit/letter, so "16-3" is 16 and 3), thousands groups
# or plain digits, optional decimals, optional "/denominator". ASCII-only look-behind: CJK
# characters count as word characters in Python, and "有5个" must still yield 5.
_NUMBER = re.compile(
    r"(?<![0-9A-Za-z.])(?P<sign>[-−])?"
    r"(?P<int>[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?P<dec>\.[0-9]+)?"
    r"(?:\s?/\s?(?P<den>[0-9]+))?(?![0-9])"
)
_REL_TOL = Fraction(1, 10**6)


def normalize_text(text: str) -> str:
    """NFKC (full-width digits and signs -> ASCII) and LaTeX number noise removed."""
    text = unicodedata.normalize("NFKC", text)
    text = text.replace("\\!", "").replace("{,}", ",").replace("\\,", "")
    return text.replace("\\$", "$").replace("\\%", "%")


def find_numbers(text: str) -> list[str]:
    """All numbers in ``text``, in order, canonical (``"-1,200.50"`` -> ``"-1200.50"``)."""
    out = []
    for m in _NUMBER.finditer(normalize_text(text)):
        num = ("-" if m["sign"] else "") + m["int"].replace(",", "") + (m["dec"] or "")
        out.append(num + (f"/{m['den']}" if m["den"] else ""))
    return out


def parse_number(text: str | None) -> Fraction | None:
    """The first number in ``text`` as an exact rational, or None (division by zero -> None)."""
    nums = find_numbers(text or "")
    if not nums:
        return None
    num, _, den = nums[0].partition("/")
    try:
        return Fraction(num) / Fraction(den or 1)
    except ZeroDivisionError:
        return None


def extract_final_number(text: str, markers: Sequence[str] = ANSWER_MARKERS) -> str | None:
    """The model's final numeric answer (see module docstring for the priority order)."""
    norm = normalize_text(text)
    lower = norm.lower()
    positions = [(lower.rfind(m.lower()), m) for m in markers]
    pos, marker = max(positions)
    if pos >= 0:
        after = find_numbers(norm[pos + len(marker) :])
        if after:
            return after[0]
    boxed = last_boxed(norm)
    if boxed is not None and find_numbers(boxed):
        return find_numbers(boxed)[0]
    nums = find_numbers(norm)
    return nums[-1] if nums else None


def numbers_equal(pred: str | Fraction | None, gold: str | Fraction | None) -> bool:
    """Numeric equality of two answers, up to a relative tolerance of 1e-6."""
    a = pred if isinstance(pred, Fraction) else parse_number(pred)
    b = gold if isinstance(gold, Fraction) else parse_number(gold)
    if a is None or b is None:
        return False
    return abs(a - b) <= _REL_TOL * max(Fraction(1), abs(b))


def gsm8k_gold(solution: str) -> str:
    """GSM8K gold number: the text after the last ``####`` of a worked solution, commas removed."""
    return solution.rsplit("####", 1)[-1].strip().replace(",", "")


def score_numeric(
    output: str, gold: str, markers: Sequence[str] = ANSWER_MARKERS
) -> dict[str, float]:
    """``{"accuracy": 1.0|0.0, "extracted": 1.0|0.0}`` for a free-text numeric answer."""
    pred = extract_final_number(output, markers)
    return {"accuracy": float(numbers_equal(pred, gold)), "extracted": float(pred is not None)}


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` / ``\\fbox{...}`` (balanced braces), or None.

    Also accepts the brace-less form ``\\boxed 5``.
    """
    starts = [m.end() for m in re.finditer(r"\\(?:boxed|fbox)", text)]
    for start in reversed(starts):
        rest = text[start:]
        if rest.startswith(" ") and not rest.lstrip().startswith("{"):
            token = re.match(r"\s+([^\s$]+)", rest)
            return token.group(1).rstrip(".,") if token else None
        content = _braced(rest.lstrip())
        if content is not None:
            return content
    return None


def _braced(text: str) -> str | None:
    """Content of the brace group that opens ``text`` (``"{a{b}}c"`` -> ``"a{b}"``)."""
    if not text.startswith("{"):
        return None
    depth = 0
    for i, ch in enumerate(text):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth == 0:
            return text[1:i]
    return None


def math_equal(pred: str | None, gold: str) -> bool:
    """Symbolic equivalence of two LaTeX answers with ``math-verify`` (gold first: asymmetric).

    ``\\frac{1}{2}``, ``1/2`` and ``0.5`` are equal; so are ``\\left( 3, \\frac{\\pi}{2} \\right)``
    and ``(3,\\pi/2)``. Answers math-verify cannot parse (e.g. ``\\text{Evelyn}``) fall back to
    a whitespace- and ``\\text``-insensitive string comparison.
    """
    if pred is None:
        return False
    from math_verify import parse, verify

    # math-verify's timeouts use SIGALRM, which only works in the main thread.
    timeout = 5 if threading.current_thread() is threading.main_thread() else None
    gold_parsed = parse(f"${gold}$", parsing_timeout=timeout)
    pred_parsed = parse(f"${pred}$", parsing_timeout=timeout)
    if gold_parsed and pred_parsed and verify(gold_parsed, pred_parsed, timeout_seconds=timeout):
        return True
    return _plain(pred) == _plain(gold)


def _plain(latex: str) -> str:
    """Crude canonical form for answers math-verify cannot compare."""
    text = re.sub(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}", r"\1", latex)
    text = re.sub(r"\\(?:left|right|displaystyle|!|,|;)", "", text)
    return re.sub(r"\s+", "", text).strip("$.").lower()


def numeric_answers_agree(output: str, reference: str) -> bool:
    """Two free-text answers end in the same number (both without one also agree)."""
    a, b = extract_final_number(output), extract_final_number(reference)
    return (a is None and b is None) or numbers_equal(a, b)


def boxed_answers_agree(output: str, reference: str) -> bool:
    """Two answers' last ``\\boxed{}`` are equivalent under math-verify (or both missing)."""
    a, b = last_boxed(output), last_boxed(reference)
    if a is None or b is None:
        return a is None and b is None
    return a == b or math_equal(a, b)


def score_boxed(output: str, gold: str) -> dict[str, float]:
    """``{"accuracy", "extracted"}`` for a MATH-style answer: last box vs gold via math-verify."""
    pred = last_boxed(output)
    return {"accuracy": float(math_equal(pred, gold)), "extracted": float(pred is not None)}
