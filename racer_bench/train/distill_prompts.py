"""Prompt sources for self-distillation, all disjoint from every evaluation set.

None of these prompts comes from HumanEval, Spec-Bench/MT-Bench, GSM8K, MATH or MGSM; all are
built offline, deterministically, from the Python standard library or from text written here:

* ``code`` -- one HumanEval-style chat prompt per documented public function of a fixed list of
  standard-library modules: its signature and first docstring paragraph inside the HumanEval
  chat instruction (HumanEval's problems are hand-written puzzles, not stdlib functions).
* ``mbpp`` -- the same functions as MBPP-style one-line tasks ("Write a Python function
  ``name(args)`` that ..."), for answers in prose + code rather than completion.
* ``chat`` -- hand-written instructions, then instruction templates crossed with topics.
* ``math`` -- arithmetic word problems generated from templates written here (random numbers,
  fixed seed), asked after GSM8K's 8 fixed chain-of-thought exemplars exactly as the ``gsm8k``
  task asks its questions, so the continuations follow the evaluation format.
"""

from __future__ import annotations

import importlib
import inspect
import io
import random
import re
from collections.abc import Callable
from contextlib import redirect_stdout
from dataclasses import dataclass

from racer_bench.errors import ConfigError
from racer_bench.tasks.exemplars import GSM8K_EXEMPLARS
from racer_bench.tasks.humaneval import INSTRUCTION

STDLIB_MODULES = (
    "bisect", "calendar", "colorsys", "csv", "difflib", "fnmatch", "fractions", "functools",
    "glob", "gzip", "heapq", "html", "ipaddress", "itertools", "json", "keyword", "linecache",
    "mimetypes", "ntpath", "operator", "os.path", "pathlib", "posixpath", "pprint", "quopri",
    "random", "re", "shlex", "shutil", "statistics", "string", "tarfile", "textwrap", "tokenize",
    "urllib.parse", "uu", "uuid", "zipfile", "base64", "binascii", "copy", "dataclasses", "enum",
    # added for the larger distillation set
    "ast", "cmd", "codecs", "collections", "configparser", "contextlib", "dis", "email.utils",
    "filecmp", "getopt", "gettext", "inspect", "locale", "logging", "numbers", "pickletools",
    "platform", "secrets", "subprocess", "sysconfig", "tempfile", "threading", "timeit",
    "traceback", "types", "typing", "warnings", "wsgiref.util", "xml.dom.minidom", "zipapp",
    "email.header", "http.cookiejar", "urllib.request", "argparse", "abc", "copyreg", "datetime",
    "decimal", "hmac", "io", "mailbox", "netrc", "plistlib", "pydoc", "reprlib", "sched",
    "selectors", "shelve", "smtplib", "socket", "sqlite3", "stat", "struct", "tabnanny", "token",
    "trace", "tracemalloc", "unittest.util", "urllib.robotparser", "weakref",
    "xml.sax.saxutils", "zoneinfo", "importlib.util", "json.encoder", "html.parser",
    "concurrent.futures", "doctest", "ftplib", "optparse", "os",
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

CHAT_TEMPLATES = (
    "Explain {} in simple terms.",
    "Give three interesting facts about {}.",
    "Write a short paragraph about the history of {}.",
    "What are common misconceptions about {}?",
)

CHAT_TOPICS = (
    "photosynthesis", "the printing press", "volcanoes", "the stock market", "machine learning",
    "the immune system", "coffee", "the Roman Empire", "black holes", "recycling", "jazz music",
    "the internet", "electric cars", "honeybees", "chess", "sleep", "the moon", "rainbows",
    "vaccines", "earthquakes", "bread baking", "the Olympic Games", "solar panels",
    "public libraries", "the violin", "glaciers", "origami", "the human heart", "composting",
    "lighthouses",
)  # fmt: skip

NAMES = (
    "Ana", "Ben", "Chloe", "Dev", "Elena", "Femi", "Grace", "Hiro", "Ines", "Jonas",
    "Kara", "Liam", "Mei", "Noah", "Omar", "Priya", "Quinn", "Rosa", "Sam", "Tariq",
)  # fmt: skip


@dataclass(frozen=True)
class DistillPrompt:
    """One self-distillation prompt: its source and its chat messages (the last is the user's)."""

    source: str
    messages: tuple[tuple[str, str], ...]  # (role, content)


def stdlib_functions(modules: tuple[str, ...] = STDLIB_MODULES) -> list[tuple[str, str, str]]:
    """(name, signature line, first docstring paragraph) of every documented public function."""
    found: list[tuple[str, str, str]] = []
    seen: set[tuple[str, str]] = set()  # os.path is posixpath: keep each function once
    for module_name in modules:
        try:
            with redirect_stdout(io.StringIO()):  # some modules print on import
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
                signature = f"def {name}{stable_repr(str(inspect.signature(obj)))}:"
            except (TypeError, ValueError):
                continue
            first = doc.split("\n\n")[0].strip()
            if (signature, first) not in seen:
                seen.add((signature, first))
                found.append((name, signature, first))
    return found


def stable_repr(signature: str) -> str:
    """A signature without memory addresses (default values like ``<function f at 0x..>``),
    so prompts -- and the cache keys made from them -- are the same in every process."""
    signature = re.sub(r"<function <lambda> at 0x[0-9a-f]+>", "...", signature)
    signature = re.sub(r"<function ([\w.]+) at 0x[0-9a-f]+>", r"\1", signature)
    return re.sub(r"<[^<>]* at 0x[0-9a-f]+>", "...", signature)


def _user(text: str, source: str) -> DistillPrompt:
    return DistillPrompt(source, (("user", text),))


def code_prompts() -> list[DistillPrompt]:
    """HumanEval-style instructions for stdlib functions."""
    return [
        _user(INSTRUCTION.format(prompt=f'{sig}\n    """{doc}"""\n'), "code")
        for _, sig, doc in stdlib_functions()
    ]


def mbpp_prompts() -> list[DistillPrompt]:
    """MBPP-style one-line tasks for the same functions (every second one, other phrasing)."""
    out = []
    for name, sig, doc in stdlib_functions()[1::2]:
        args = sig.removeprefix(f"def {name}").removesuffix(":")
        task = " ".join(doc.split())
        out.append(_user(f"Write a Python function `{name}{args}`. {task}", "mbpp"))
    return out


def chat_prompts() -> list[DistillPrompt]:
    """Hand-written instructions, then every (template, topic) pair, topic-major."""
    texts = list(CHAT_PROMPTS)
    texts += [t.format(topic) for topic in CHAT_TOPICS for t in CHAT_TEMPLATES]
    return [_user(t, "chat") for t in texts]


def _problem(rng: random.Random) -> str:
    """One arithmetic word problem from a random template (numbers keep answers integral)."""
    n = rng.choice(NAMES)
    r = rng.randint
    templates: list[Callable[[], str]] = [
        lambda: f"{n} has {r(5, 40)} stickers. {n} buys {r(2, 9)} packs with {r(3, 12)} "
        "stickers in each pack. How many stickers does " + n + " have now?",
        lambda: f"A bakery makes {r(20, 90)} loaves of bread each day and sells them for "
        f"${r(2, 6)} each. How much money does the bakery make in {r(2, 7)} days?",
        lambda: f"{n} reads {r(5, 30)} pages every weekday and {r(10, 50)} pages on each day "
        f"of the weekend. How many pages does {n} read in {r(2, 5)} weeks?",
        lambda: f"A farmer has {r(4, 15)} rows of apple trees with {r(5, 20)} trees in each "
        f"row. Each tree gives {r(20, 80)} apples. How many apples does the farmer harvest?",
        lambda: f"{n} saved ${20 * r(3, 30)} and spent {rng.choice((10, 20, 25, 40, 50, 75))}% "
        "of it on a bike. How much money is left?",
        lambda: f"A train travels at {10 * r(4, 12)} km per hour for {r(2, 5)} hours, then at "
        f"{10 * r(3, 9)} km per hour for {r(1, 4)} hours. How far does it travel in total?",
        lambda: f"There are {20 * r(1, 6)} students in a class and "
        f"{rng.choice((25, 40, 50, 60, 75))}% of them are girls. How many boys are there?",
        lambda: f"A store sells pencils in boxes of {r(6, 24)}. A school needs {r(50, 400)} "
        "pencils. How many boxes must the school buy?",
        lambda: f"{n} runs {r(4, 12)} laps around a {100 * r(2, 5)}-meter track every day. How "
        f"many kilometers does {n} run in {r(3, 10)} days?",
        lambda: (lambda b: f"A recipe uses {r(2, 5)} cups of flour for {b} cookies. How many "
                 f"cups of flour are needed for {b * r(2, 6)} cookies?")(r(10, 30)),
        lambda: f"{n} earns ${r(9, 30)} per hour and works {r(3, 9)} hours a day, {r(2, 6)} "
        f"days a week. How much does {n} earn in {r(2, 4)} weeks?",
        lambda: (lambda b, c: f"A tank holds {b * c + r(20, 200)} liters of water. It leaks "
                 f"{b} liters per hour. After {c} hours, {n} adds {r(10, 90)} liters. How many "
                 "liters are in the tank now?")(r(2, 15), r(2, 8)),
    ]  # fmt: skip
    return rng.choice(templates)()


def math_prompts(seed: int = 0, count: int = 400) -> list[DistillPrompt]:
    """Generated word problems after GSM8K's 8 exemplars (the ``gsm8k`` task's chat format)."""
    rng = random.Random(seed)
    shots: list[tuple[str, str]] = []
    for q, a in GSM8K_EXEMPLARS:
        shots += [("user", "Q: " + q), ("assistant", "A: " + a)]
    seen: set[str] = set()
    out = []
    while len(out) < count:
        question = _problem(rng)
        if question not in seen:
            seen.add(question)
            out.append(DistillPrompt("math", (*shots, ("user", "Q: " + question))))
    return out


SOURCES: dict[str, Callable[[], list[DistillPrompt]]] = {
    "code": code_prompts,
    "mbpp": mbpp_prompts,
    "chat": chat_prompts,
    "math": math_prompts,
}


def distill_prompts(counts: dict[str, int | None]) -> list[DistillPrompt]:
    """The first ``counts[source]`` prompts of each source (None = all), in source order."""
    out: list[DistillPrompt] = []
    for source, count in counts.items():
        if source not in SOURCES:
            raise ConfigError(
                f"data.sources.{source}: unknown source; allowed: {', '.join(SOURCES)}"
            )
        out += SOURCES[source]()[:count]
    return out
