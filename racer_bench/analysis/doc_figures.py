"""Numbers in the README and docs that come from records, kept equal to them.

A figure is written between two HTML comments, which Markdown does not show::

    RACER 110.9 tok/s, <!-- fig readme_main speedup .2f -->1.32<!-- /fig -->x

The opening comment names the record (``SOURCE``), what to read from it (``EXPR``) and how to
print it (``FORMAT``); ``scripts/fill_doc_figures.py`` rewrites the text between the comments
from the record, and ``--check`` (and a unit test) fails while any text differs.

- ``SOURCE``: a run folder under ``results/curated/`` (``readme_main``,
  ``racer_main/suffix_spec_bench``: its ``summary.json``), one file of it
  (``readme_main/manifest.json``), or a bench record ``bench/<name>``
  (``docs/bench/<name>.json``); ``archive/<folder>`` reads ``results/archive/`` instead of
  ``results/curated/`` (records a newer run replaced, where a doc still describes them). A
  ``*`` in a run-folder source stands for every folder it matches, and the figure is the
  range ``low-high`` of EXPR over them.
- ``EXPR``: a dotted path into the JSON (``speedup``, ``speedup_ci95.0``,
  ``per_category.translation.speedup``, ``by_batch.16.mat``) or ``name(arg,...)``, one of
  :data:`EXPRESSIONS` (derived figures: ratios, counts, shares, bench contenders).
- ``FORMAT``: a Python format spec (``.2f``, ``.0%``, ``+.1%``; ``d`` and ``,d`` round to an
  integer first); ``s`` prints text as it is.

Reads JSON with the standard library only, so filling the docs needs no model code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from racer_bench.analysis import quality

CURATED = Path("results/curated")
ARCHIVE = Path("results/archive")
ARCHIVE_PREFIX = "archive/"
BENCH = Path("docs/bench")
MARKER = re.compile(
    r"<!-- fig (?P<source>\S+) (?P<expr>\S+) (?P<spec>\S+) -->(?P<text>[^<\n]*)<!-- /fig -->"
)
OPENING = re.compile(r"<!-- fig\b")
CALL = re.compile(r"(?P<name>\w+)\((?P<args>[^()\s]*)\)")
MODES = ("baseline", "method", "strict", "reference")


@dataclass(frozen=True)
class Figure:
    """One marked figure of a document: what it reads, how it prints, what the doc shows."""

    source: str
    expr: str
    spec: str
    text: str
    start: int  # span of ``text`` in the document
    end: int
    line: int

    @property
    def marker(self) -> str:
        return f"{self.source} {self.expr} {self.spec}"


def parse(doc: str) -> list[Figure]:
    """Every figure of ``doc``, in order; a ``<!-- fig`` that is not a whole marker raises."""
    figures = [
        Figure(**m.groupdict(), start=m.start("text"), end=m.end("text"), line=_line(doc, m))
        for m in MARKER.finditer(doc)
    ]
    good = {f.start for f in figures}
    bad = [_line(doc, m) for m in OPENING.finditer(doc) if doc.find("-->", m.end()) + 3 not in good]
    if bad:
        raise ValueError(f"malformed figure marker on line(s) {bad}")
    return figures


def _line(doc: str, match: re.Match[str]) -> int:
    return doc.count("\n", 0, match.start()) + 1


def lookup(node: Any, path: str) -> Any:
    """The value at a dotted path: keys of objects, indices of lists."""
    for part in path.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def render(value: Any, spec: str) -> str:
    """``value`` printed with a format spec; a ``(low, high)`` pair as ``low-high``."""
    if isinstance(value, tuple):
        return "-".join(render(v, spec) for v in value)
    if spec == "s" or isinstance(value, str):
        return str(value)
    return format(round(value) if spec.endswith("d") else value, spec)


class Records:
    """The records under a repository root, each file read once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._read: dict[Path, Any] = {}

    def _load(self, path: Path) -> Any:
        if path not in self._read:
            text = path.read_text(encoding="utf-8")
            self._read[path] = (
                [json.loads(line) for line in text.splitlines() if line.strip()]
                if path.suffix == ".jsonl"
                else json.loads(text)
            )
        return self._read[path]

    def path(self, source: str, name: str = "summary.json") -> Path:
        """The file a source names (``name`` inside a run folder)."""
        if source.startswith("bench/"):
            return self.root / BENCH / f"{source.removeprefix('bench/')}.json"
        path = self.root / self.base(source) / source.removeprefix(ARCHIVE_PREFIX)
        return path if path.suffix == ".json" else path / name

    @staticmethod
    def base(source: str) -> Path:
        """``results/archive`` for an ``archive/...`` source (records a newer run replaced,
        still quoted where a doc describes them), else ``results/curated``."""
        return ARCHIVE if source.startswith(ARCHIVE_PREFIX) else CURATED

    def json(self, source: str) -> Any:
        return self._load(self.path(source))

    def prompts(self, source: str) -> list[dict[str, Any]]:
        """The prompt records of a run folder (its ``prompts.jsonl``)."""
        return self._load(self.path(source, "prompts.jsonl"))

    def expand(self, source: str) -> list[str]:
        """The run folders a source with ``*`` matches (those holding a summary), sorted."""
        base = self.root / self.base(source)
        pattern = source.removeprefix(ARCHIVE_PREFIX)
        found = sorted(p.parent for p in base.glob(f"{pattern}/summary.json"))
        if not found:
            raise FileNotFoundError(f"no run folder matches {self.base(source) / pattern}")
        prefix = ARCHIVE_PREFIX if source.startswith(ARCHIVE_PREFIX) else ""
        return [prefix + p.relative_to(base).as_posix() for p in found]


# --- derived figures: EXPR ``name(arg,...)`` calls ``EXPRESSIONS[name](records, source, *args)``


def _turns(record: dict[str, Any], mode: str) -> list[dict[str, Any]]:
    return (record.get(mode) or {}).get("turns", [])


def _wall(turn: dict[str, Any]) -> float:
    """A turn's seconds (``generate()``'s turns hold one ``wall_time``), as metrics.wall_time."""
    return turn["wall_time"] if "wall_time" in turn else turn["prefill_time"] + turn["decode_time"]


def ratio(records: Records, source: str, top: str, bottom: str) -> float:
    """One field of the record over another (``tokens_per_s`` over ``reference_tokens_per_s``)."""
    data = records.json(source)
    return lookup(data, top) / lookup(data, bottom)


def scaled(records: Records, source: str, path: str, factor: str) -> float:
    """A field times a factor (seconds in ms: ``scaled(ar_step_s,1000)``)."""
    return lookup(records.json(source), path) * float(factor)


def of_n(records: Records, source: str, path: str) -> str:
    """A share of the run's prompts as a count, ``k/n`` (``identical`` 1.0 of 15: ``15/15``)."""
    data = records.json(source)
    n = int(data["n_prompts"])
    return f"{round(lookup(data, path) * n)}/{n}"


def hist_share(records: Records, source: str, path: str, low: str, high: str) -> float:
    """Share of a histogram's counts (``draft_size_hist``: steps per size) in [low, high]."""
    hist = {int(k): v for k, v in lookup(records.json(source), path).items()}
    return sum(v for k, v in hist.items() if int(low) <= k <= int(high)) / sum(hist.values())


def time_share(records: Records, source: str, mode: str) -> float:
    """Share of the run's timed decoding (every mode, every prompt) spent by ``mode``."""
    prompts = records.prompts(source)
    seconds = {m: sum(_wall(t) for r in prompts for t in _turns(r, m)) for m in MODES}
    return seconds[mode] / sum(seconds.values())


def first_tok_s(records: Records, source: str, mode: str, batch: str, n: str) -> float:
    """tok/s of ``mode`` over a vLLM run's first ``n`` prompts at one batch size."""
    prompts = [
        r for r in records.prompts(source)
        if r.get("batch_size", 1) == int(batch) and r["index"] < int(n)
    ]  # fmt: skip
    turns = [t for r in prompts for t in _turns(r, mode)]
    return sum(len(t["tokens"]) for t in turns) / sum(_wall(t) for t in turns)


def output_stat(records: Records, source: str, mode: str, stat: str) -> float:
    """A paired lossy run's output statistic of ``mode`` (``strict`` or ``method``): ``length``,
    ``stopped`` or ``repeat4`` (:func:`racer_bench.analysis.quality.output_stats`)."""
    return quality.output_stats(records.prompts(source), mode)[stat]


def _contender(records: Records, source: str, name: str) -> dict[str, Any]:
    data = records.json(source)
    return data.get("contenders", data)[name]


def contender(records: Records, source: str, name: str, field: str) -> Any:
    """A field of one contender of a bench record (``mat``, ``steps``)."""
    return _contender(records, source, name)[field]


def tok_s(records: Records, source: str, name: str) -> float:
    """A bench contender's tokens per second (its tokens over its seconds)."""
    c = _contender(records, source, name)
    return c["tokens"] / c["seconds"]


def vs(records: Records, source: str, name: str, base: str) -> float:
    """One bench contender's tok/s over another's (``vs(racer,ar)``: the speedup)."""
    return tok_s(records, source, name) / tok_s(records, source, base)


def _median_ms(records: Records, source: str, **key: Any) -> float:
    """The median ms of the one row of a bench record's ``medians`` that matches ``key``."""
    rows = records.json(source)["medians"]
    [row] = [m for m in rows if all(m[field] == want for field, want in key.items())]
    return 1000 * row["median_s"]


def median_ms(records: Records, source: str, name: str, shape: str, tokens: str) -> float:
    """A forward-cost record's median ms of one contender's ``shape`` forward of ``tokens``."""
    return _median_ms(records, source, contender=name, shape=shape, tokens=int(tokens))


def floor_x(records: Records, source: str, name: str, tokens: str) -> float:
    """A contender's ``tokens``-token chain forward as a multiple of its weight-read floor."""
    floor = records.json(source)["floors"][name]["floor_ms"]
    return median_ms(records, source, name, "chain", tokens) / floor


def median_ratio(records: Records, source: str, name: str, tokens: str) -> float:
    """A contender's ``tokens``-token chain forward over its 1-token one."""
    one = median_ms(records, source, name, "chain", "1")
    return median_ms(records, source, name, "chain", tokens) / one


def kernel_ms(records: Records, source: str, dtype: str, build: str, tokens: str) -> float:
    """A kernel A/B record's median ms of one build's ``tokens``-token forward at ``dtype``."""
    return _median_ms(records, source, dtype=dtype, build=build, tokens=int(tokens))


def kernel_ratio(records: Records, source: str, dtype: str, build: str, tokens: str) -> float:
    """A build's forward time over the record's first (base) build's, same dtype and size."""
    base = records.json(source)["settings"]["builds"][0]
    return kernel_ms(records, source, dtype, build, tokens) / kernel_ms(
        records, source, dtype, base, tokens
    )


def cost_at(records: Records, source: str, size: str) -> float:
    """A cost profile's cost of a ``size``-token forward, in 1-token forwards."""
    data = records.json(source)
    return data["costs"][data["sizes"].index(int(size))]


def _phases(records: Records, source: str, context: str, tokens: str) -> dict[str, float]:
    rows = records.json(source)["phases_us"]
    [row] = [r for r in rows if r["context"] == int(context) and r["tokens"] == int(tokens)]
    return {k: v for k, v in row.items() if k not in ("context", "tokens")}


def phase_us(records: Records, source: str, context: str, tokens: str, phase: str) -> float:
    """A layer-phase record's µs per step in ``phase`` (``_`` for spaces) at that cell."""
    return _phases(records, source, context, tokens)[phase.replace("_", " ")]


def phase_share(records: Records, source: str, context: str, tokens: str, phase: str) -> float:
    """A layer-phase record's share of the step in ``phase`` (``_`` for spaces) at that cell."""
    phases = _phases(records, source, context, tokens)
    return phases[phase.replace("_", " ")] / sum(phases.values())


DERIVED = (ratio, scaled, of_n, hist_share, time_share, first_tok_s, output_stat, contender, tok_s,
           vs, cost_at)  # fmt: skip
FORWARD_COST = (median_ms, floor_x, median_ratio, kernel_ms, kernel_ratio, phase_us, phase_share)
EXPRESSIONS: dict[str, Callable[..., Any]] = {f.__name__: f for f in DERIVED + FORWARD_COST}


def value(records: Records, source: str, expr: str) -> Any:
    """What EXPR reads from one source; a ``*`` source gives the (low, high) pair."""
    if "*" in source:
        values = [value(records, s, expr) for s in records.expand(source)]
        return min(values), max(values)
    call = CALL.fullmatch(expr)
    if call is None:
        return lookup(records.json(source), expr)
    args = [a for a in call["args"].split(",") if a]
    return EXPRESSIONS[call["name"]](records, source, *args)


def expected(records: Records, figure: Figure) -> str:
    """The text a figure should show, from its record."""
    return render(value(records, figure.source, figure.expr), figure.spec)


@dataclass(frozen=True)
class Stale:
    """A figure whose text is not what its record says (``want`` is None: it did not resolve)."""

    figure: Figure
    want: str | None
    error: str = ""

    def __str__(self) -> str:
        got = f"cannot resolve ({self.error})" if self.want is None else f"record: {self.want}"
        return f"line {self.figure.line}: [{self.figure.marker}] shows {self.figure.text!r}, {got}"


def fill(doc: str, records: Records) -> tuple[str, list[Stale]]:
    """``doc`` with every figure rewritten from its record, and the figures that differed."""
    stale: list[Stale] = []
    parts, last = [], 0
    for figure in parse(doc):
        try:
            want = expected(records, figure)
        except (OSError, KeyError, IndexError, ValueError, TypeError, ZeroDivisionError) as e:
            stale.append(Stale(figure, None, f"{type(e).__name__}: {e}"))
            continue
        if want != figure.text:
            stale.append(Stale(figure, want))
        parts += [doc[last : figure.start], want]
        last = figure.end
    return "".join(parts) + doc[last:], stale


def documents(root: Path) -> list[Path]:
    """The documents that may hold figures: the README and every Markdown file of docs/."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def check(root: Path, docs: Sequence[Path] | None = None) -> list[str]:
    """One line per stale or unresolvable figure of ``docs`` (default: :func:`documents`)."""
    return _run(root, docs, write=False)


def rewrite(root: Path, docs: Sequence[Path] | None = None) -> list[str]:
    """Rewrite the figures of ``docs`` from their records; one line per figure that changed or
    did not resolve (left as it was)."""
    return _run(root, docs, write=True)


def _run(root: Path, docs: Sequence[Path] | None, write: bool) -> list[str]:
    records, lines = Records(root), []
    for doc in docs or documents(root):
        text = doc.read_text(encoding="utf-8")
        new, stale = fill(text, records)
        name = doc.relative_to(root) if doc.is_relative_to(root) else doc
        lines += [f"{name}: {s}" for s in stale]
        if write and new != text:
            doc.write_text(new, encoding="utf-8")
    return lines
