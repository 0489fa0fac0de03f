"""The drafters of a replay (:mod:`racer_bench.replay.core`) by name, with their settings.

This project's own drafters (``methods/``) come from the caller as :data:`ProjectDrafter`
factories; the package adds ArcticInference's ``SuffixDecodingCache`` (``suffix-arctic``), a
brute-force longest earlier match (``sam-brute``), SAM-Decoding's ``DynSAM`` loaded from a file
given at run time (``sam-reference``) and the run's own recorded method (``recorded``).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from racer_bench.replay.core import BruteSam, Native, Replayable
from racer_bench.replay.recorded import ReplayRun


@dataclass
class SuffixSettings:
    """SuffixDecoding's settings; this project's drafter and ArcticInference's take the same."""

    max_spec_tokens: int = 64
    max_tree_depth: int = 64
    max_spec_factor: float = 1.0
    max_spec_offset: float = 0.0
    min_token_prob: float = 0.1
    max_cached_requests: int = 100000
    use_tree_spec: bool = True


class ArcticSuffix:
    """ArcticInference's SuffixDecodingCache: one request per turn, kept in the global tree."""

    def __init__(self, s: SuffixSettings) -> None:
        try:
            from arctic_inference.suffix_decoding import SuffixDecodingCache
        except ImportError:
            sys.exit(
                "suffix-arctic needs the arctic-inference package: pip install arctic-inference"
            )
        self.s = s
        self.cache = SuffixDecodingCache(s.max_tree_depth, s.max_cached_requests)
        self.request = -1
        self.seen = 0

    def start(self, prompt: list[int]) -> None:
        if self.request >= 0:
            self.cache.stop_request(self.request)
        self.request += 1
        self.cache.start_request(self.request, prompt)
        self.seen = len(prompt)

    def draft(self, context: list[int], max_depth: int) -> tuple[list[int], list[int]]:
        self._sync(context)
        s = self.s
        d = self.cache.speculate(self.request, context, s.max_spec_tokens, s.max_spec_factor,
                                 s.max_spec_offset, s.min_token_prob, s.use_tree_spec)  # fmt: skip
        return list(d.token_ids), list(d.parents)

    def commit(self, tokens: list[int], accepted: list[int]) -> None:
        self.cache.add_active_response(self.request, list(tokens))
        self.seen += len(tokens)

    def _sync(self, context: list[int]) -> None:
        if len(context) > self.seen:  # the prefill's token
            self.cache.add_active_response(self.request, context[self.seen :])
            self.seen = len(context)


class SamReference:
    """SAM-Decoding's SAM-only ``DynSAM`` (file given at run time), driven as its model does:
    the automaton holds the text up to the root, the root is looked up without insertion, and
    the chain is ``min(max_predicts, 1 + int(alpha * match))`` tokens counting the root."""

    def __init__(self, path: str, capacity: int, alpha: float) -> None:
        spec = importlib.util.spec_from_file_location("sam_reference_dyn_sam", path)
        if spec is None or spec.loader is None or not Path(path).is_file():
            sys.exit(f"sam-reference: cannot load {path} (SAM-Decoding's dyn_sam.py)")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        self.sam = module.DynSAM(max_predicts=capacity + 1, alpha=alpha, device="cpu")
        self.n = 0

    def start(self, prompt: list[int]) -> None:
        self.sam.reset()
        self.n = 0

    def draft(self, context: list[int], max_depth: int) -> tuple[list[int], list[int]]:
        if len(context) - 1 > self.n:
            self.sam.add_tokens(list(context[self.n : -1]))
            self.n = len(context) - 1
        index, length = self.sam.lookup(context[-1])
        seq, _ = self.sam.gen_draft(index, length, context[-1])
        chain = list(seq[1:])
        return chain, list(range(-1, len(chain) - 1))

    def commit(self, tokens: list[int], accepted: list[int]) -> None:
        pass  # synced from the next context


@dataclass
class Options:
    """The settings of every drafter a replay can make."""

    suffix: SuffixSettings = field(default_factory=SuffixSettings)
    sam_capacity: int = 39
    sam_alpha: float = 4.0
    sam_reference: str | None = None
    pld: tuple[int, int, int] = (1, 3, 10)  # min n-gram, max n-gram, chain length


ProjectDrafter = Callable[[Options, ReplayRun], Replayable]  # a drafter of methods/ for a run


def make_drafter(
    name: str, opts: Options, run: ReplayRun, project: Mapping[str, ProjectDrafter]
) -> Replayable:
    """The drafter ``name``: one of ``project`` (this project's drafters) or of the package."""
    if name in project:
        return project[name](opts, run)
    if name == "suffix-arctic":
        return ArcticSuffix(opts.suffix)
    if name == "sam-brute":
        return BruteSam(opts.sam_capacity, opts.sam_alpha)
    if name == "sam-reference":
        if not opts.sam_reference:
            sys.exit("sam-reference needs --sam-reference <SAM-Decoding's dyn_sam.py>")
        return SamReference(opts.sam_reference, opts.sam_capacity, opts.sam_alpha)
    if name == "recorded":
        return Native(run.recorded_method(), run.budget)
    sys.exit(f"unknown drafter {name}")
