"""Replay recorded greedy outputs through drafters, without the model: MAT per prompt and task.

Greedy decoding is lossless, so a run's autoregressive output fixes every step's verification:
at each step the drafter sees the context so far (prompt + output), its draft is walked along
the actual continuation (for a tree, the longest root path that matches), and the step commits
the accepted tokens plus one bonus token. The replay follows the decode loop
(:mod:`racer_bench.engine.decode`): the first output token comes from the prefill (not a step),
each step's draft is pruned to the room left under ``max_new_tokens``, and a step commits at
most what is left of the output. MAT is tokens committed per step, as in the run summaries.

Drafters (``--drafters``, comma-separated; the first is compared with the others):

* ``suffix``: :class:`methods.suffix.SuffixDrafter`; ``suffix-arctic``: ArcticInference's
  ``SuffixDecodingCache`` (pip package ``arctic-inference``, not a dependency of this project)
  driven the same way: one request per turn, prompt in the local tree, responses in the global
  tree in prompt order, same depth, spec-token cap, factor, offset and minimum probability;
* ``sam``: :class:`methods.sam.SamDrafter` (dynamic automaton only); ``sam-brute``: an
  independent brute-force longest earlier match (the longest suffix of the context that occurs
  earlier, its earliest occurrence's continuation, ``int(alpha * match)`` tokens, capped);
  ``sam-reference``: the ``DynSAM`` class of SAM-Decoding's SAM-only package, loaded at run
  time from the file given by ``--sam-reference`` (never part of this repository);
* ``pld``: :class:`methods.pld.PLDDrafter` with ``--pld MIN,MAX,K`` (n-gram bounds, chain
  length): replayed over a vLLM run's batch-1 AR outputs (``--batch-size 1``) with vLLM's
  ``ngram`` settings it cross-checks the two implementations on the same outputs;
* ``recorded``: the run's own method from its manifest; its replayed steps must equal the
  recorded ones (a check of the replay itself: prompts re-rendered, steps, pruning).

Records come from run folders (``prompts.jsonl`` + ``manifest.json``); prompt ids are rebuilt
with the run's task and tokenizer from the baseline (autoregressive) outputs, so the data
directory (``$RACER_BENCH_DATA`` or ``--data-dir``) and the cached model folder must exist::

    PYTHONPATH=. python scripts/simulate_drafts.py results/curated/racer_main/pld_humaneval \\
        results/curated/racer_main/pld_spec_bench --drafters suffix,suffix-arctic

``--agreement`` also asks every drafter for a draft at every output position (each drafter's
state depends only on the tokens seen, not on where steps ended) and counts the positions where
the drafts equal the first drafter's, and where their accepted lengths differ.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from methods.datastore import config_vocab, load_tokenizer
from racer_bench.config.construct import DISPLAY_KEYS, task_max_new_tokens
from racer_bench.config.paths import DEFAULT_MODELS_DIR
from racer_bench.engine.structs import Draft, DraftContext, Feedback
from racer_bench.engine.tree import prune

BIG_BUDGET = 256  # LoopOptions.max_draft: the engine's budget under the fixed scheduler


# ---------------------------------------------------------------------------------------------
# The replay (pure: tokens in, steps out)


class Replayable(Protocol):
    """A drafter as the replay drives it."""

    def start(self, prompt: list[int]) -> None:
        """A new request (one turn) with these prompt ids."""

    def draft(self, context: list[int], max_depth: int) -> tuple[list[int], list[int]]:
        """(tokens, parents) below the root ``context[-1]``; parents ``-1`` = the root."""

    def commit(self, tokens: list[int], accepted: list[int]) -> None:
        """The step's committed tokens and the accepted node indices of the last draft."""


def accepted_path(
    tokens: Sequence[int], parents: Sequence[int], actual: Sequence[int]
) -> list[int]:
    """Node indices of the longest root path whose tokens are a prefix of ``actual``.

    At each depth the first child (in draft order) carrying the next actual token is taken;
    a draft has at most one child per token under a node, so the choice is unique in practice.
    """
    children: dict[int, list[int]] = {}
    for i, p in enumerate(parents):
        children.setdefault(p, []).append(i)
    path: list[int] = []
    node = -1
    for token in actual:
        nxt = next((c for c in children.get(node, ()) if tokens[c] == token), None)
        if nxt is None:
            break
        path.append(nxt)
        node = nxt
    return path


@dataclass
class Step:
    pos: int  # output tokens already committed when the step drafted
    n_draft: int
    accepted: int
    committed: int


def prune_lists(tokens: list[int], parents: list[int], budget: int, max_depth: int) -> Draft:
    draft = Draft(tokens=torch.tensor(tokens, dtype=torch.long),
                  parents=torch.tensor(parents, dtype=torch.long))  # fmt: skip
    return prune(draft, budget, max_depth)


def replay(
    drafter: Replayable,
    prompt: list[int],
    output: list[int],
    max_new_tokens: int | None = None,
    budget: int = BIG_BUDGET,
) -> list[Step]:
    """Steps of a greedy decode of ``output`` after ``prompt`` with ``drafter``'s drafts.

    ``output[0]`` comes from the prefill; every step drafts below the last committed token,
    accepts the longest matching root path (cut to what is left of the output) and commits it
    plus the bonus token (when any output is left after it). With ``max_new_tokens``, drafts
    are pruned to the room left under it, as in the decode loop; None: no such cap.
    """
    drafter.start(list(prompt))
    steps: list[Step] = []
    pos = 1
    while pos < len(output):
        context = [*prompt, *output[:pos]]
        room = max_new_tokens - pos if max_new_tokens is not None else len(output)
        max_depth = max(room - 1, 0)  # accepted + bonus fit in the room left, as in the loop
        tokens, parents = drafter.draft(context, max_depth)
        draft = prune_lists(tokens, parents, budget, max_depth)
        tokens, parents = draft.tokens.tolist(), draft.parents.tolist()
        left = output[pos:]
        path = accepted_path(tokens, parents, left)
        committed = min(len(path) + 1, len(left))
        path = path[:committed]
        drafter.commit(left[:committed], path)
        steps.append(Step(pos, len(tokens), len(path), committed))
        pos += committed
    return steps


def mat(steps: Sequence[Step]) -> float:
    """Tokens committed per step (NaN without steps)."""
    return sum(s.committed for s in steps) / len(steps) if steps else float("nan")


# ---------------------------------------------------------------------------------------------
# Drafters


class Native:
    """One of this project's drafters (reset / propose / update)."""

    def __init__(self, drafter: Any, budget: int = BIG_BUDGET) -> None:
        self.drafter, self.budget = drafter, budget
        self._last = Draft.empty()

    def start(self, prompt: list[int]) -> None:
        self.drafter.reset(prompt, None)

    def draft(self, context: list[int], max_depth: int) -> tuple[list[int], list[int]]:
        ctx = DraftContext(list(context), context[-1], self.budget, max_depth)
        self._last = prune(self.drafter.propose(ctx), self.budget, max_depth)
        return self._last.tokens.tolist(), self._last.parents.tolist()

    def commit(self, tokens: list[int], accepted: list[int]) -> None:
        self.drafter.update(Feedback(self._last, list(accepted), list(tokens)))


@dataclass
class SuffixSettings:
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


class BruteSam:
    """Longest suffix of the context that occurs earlier; its earliest occurrence's sequel."""

    def __init__(self, capacity: int, alpha: float) -> None:
        self.capacity, self.alpha = capacity, alpha

    def start(self, prompt: list[int]) -> None:
        pass

    def draft(self, context: list[int], max_depth: int) -> tuple[list[int], list[int]]:
        match, end = longest_earlier_match(context)
        n = min(self.capacity, max_depth, int(match * self.alpha)) if match else 0
        chain = context[end + 1 : end + 1 + n]
        return chain, list(range(-1, len(chain) - 1))

    def commit(self, tokens: list[int], accepted: list[int]) -> None:
        pass


def longest_earlier_match(tokens: Sequence[int]) -> tuple[int, int]:
    """(length, end) of the longest suffix of ``tokens`` that also ends at an earlier position
    ``end`` (the earliest such end); (0, -1) when the last token never occurred before."""
    last = len(tokens) - 1
    best, best_end = 0, -1
    for end in range(last):
        n = 0
        while n <= end and tokens[end - n] == tokens[last - n]:
            n += 1
        if n > best:
            best, best_end = n, end
    return best, best_end


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
    suffix: SuffixSettings = field(default_factory=SuffixSettings)
    sam_capacity: int = 39
    sam_alpha: float = 4.0
    sam_reference: str | None = None
    pld: tuple[int, int, int] = (1, 3, 10)  # min n-gram, max n-gram, chain length


def make_drafter(name: str, opts: Options, run: Run) -> Replayable:
    if name == "suffix":
        from methods.suffix import SuffixDrafter

        s = opts.suffix
        return Native(SuffixDrafter(run.vocab_size, s.max_spec_tokens, s.max_tree_depth,
                                    s.max_spec_factor, s.max_spec_offset, s.min_token_prob,
                                    s.max_cached_requests, s.use_tree_spec))  # fmt: skip
    if name == "suffix-arctic":
        return ArcticSuffix(opts.suffix)
    if name == "sam":
        from methods.sam import SamDrafter

        return Native(SamDrafter(run.vocab_size, opts.sam_capacity, opts.sam_alpha))
    if name == "sam-brute":
        return BruteSam(opts.sam_capacity, opts.sam_alpha)
    if name == "sam-reference":
        if not opts.sam_reference:
            sys.exit("sam-reference needs --sam-reference <SAM-Decoding's dyn_sam.py>")
        return SamReference(opts.sam_reference, opts.sam_capacity, opts.sam_alpha)
    if name == "pld":
        from methods.pld import PLDDrafter

        low, high, k = opts.pld
        return Native(PLDDrafter(run.vocab_size, high, k, min_ngram_size=low))
    if name == "recorded":
        return Native(run.recorded_method(), run.budget)
    sys.exit(f"unknown drafter {name}")


# ---------------------------------------------------------------------------------------------
# Runs


@dataclass
class Turn:
    id: str
    turn: int
    prompt: list[int]
    output: list[int]
    recorded: list[int]  # the method's recorded n_committed per step (empty when not identical)


@dataclass
class Run:
    folder: Path
    manifest: dict[str, Any]
    records: list[dict[str, Any]]
    tokenizer: Any
    vocab_size: int
    task: Any

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def max_new_tokens(self) -> int:
        return int(task_max_new_tokens(self.task, self.manifest["max_new_tokens"]))

    @property
    def budget(self) -> int:
        return int(self.manifest["config"].get("max_draft", BIG_BUDGET))

    def recorded_method(self) -> Any:
        from hydra.utils import instantiate

        method = self.manifest["config"]["method"]
        made = instantiate({k: v for k, v in method.items() if k not in DISPLAY_KEYS})
        return made(vocab_size=self.vocab_size) if callable(made) else made

    def turns(self, warmup: int) -> Iterator[Turn]:
        """Every turn of the ok records in file order, after the warm-up prompts (which the
        runner decodes before the recorded ones, with the same drafter)."""
        ok = [r for r in self.records if r.get("status") == "ok"]
        prompts = {p.id: p for p in self.task.load()}
        for r in [*ok[:warmup], *ok]:
            history: list[str] = []
            prompt = prompts[r.get("prompt_id", r["id"])]  # vLLM records: id names the batch size
            for i, t in enumerate(r["baseline"]["turns"]):
                ids = self.task.render(prompt, i, history, self.tokenizer)
                history.append(t["text"])
                same = r.get("identical", False)
                recorded = r["method"]["turns"][i]["steps"]["n_committed"] if same else []
                yield Turn(r["id"], i, list(ids), list(t["tokens"]), list(recorded))


def load_run(folder: Path, data_dir: str | None, batch_size: int = 1) -> Run:
    """A run folder; of a vLLM run (a record per prompt and batch size), the records of
    ``batch_size``."""
    from hydra.utils import instantiate

    manifest = json.loads((folder / "manifest.json").read_text())
    records = [json.loads(line) for line in (folder / "prompts.jsonl").read_text().splitlines()]
    records = [r for r in records if r.get("batch_size", batch_size) == batch_size]
    config = manifest["config"]
    task_cfg = {k: v for k, v in config["task"].items() if k not in DISPLAY_KEYS}
    if task_cfg.get("data_dir") == "<data_dir>":
        task_cfg["data_dir"] = data_dir or os.environ.get("RACER_BENCH_DATA") or "data"
    task = instantiate(task_cfg)
    model = config["model"]
    models_dir = Path(str(model.get("cache_dir", DEFAULT_MODELS_DIR))).expanduser()
    name = str(model.get("name") or manifest.get("model") or "smollm2_135m")
    if not (models_dir / name).is_dir():
        sys.exit(f"{folder}: model folder {models_dir / name} missing (run the benchmark once)")
    tokenizer = load_tokenizer(name, 0, models_dir)
    vocab = config_vocab(models_dir / name / "config.json") or len(tokenizer)
    return Run(folder, manifest, records, tokenizer, vocab, task)


# ---------------------------------------------------------------------------------------------
# Reporting


@dataclass
class Tally:
    steps: int = 0
    tokens: int = 0
    prompt_mats: list[float] = field(default_factory=list)

    def add(self, steps: Sequence[Step]) -> None:
        self.steps += len(steps)
        self.tokens += sum(s.committed for s in steps)

    @property
    def mat(self) -> float:
        return self.tokens / self.steps if self.steps else float("nan")


def simulate(
    runs: Sequence[Run], names: Sequence[str], opts: Options, warmup: int | None,
    per_prompt: Callable[[str], None] | None = None, agreement: bool = False,
) -> dict[str, dict[str, Tally]]:  # fmt: skip
    """{run name: {drafter: tally}}; each drafter is fresh per run (prompt order kept)."""
    out: dict[str, dict[str, Tally]] = {}
    for run in runs:
        drafters = {n: make_drafter(n, opts, run) for n in names}
        tallies = {n: Tally() for n in names}
        agree = AgreementTally(names) if agreement else None
        n_warm = int(run.manifest["config"].get("warmup_prompts", 0)) if warmup is None else warmup
        for k, turn in enumerate(run.turns(n_warm)):
            measured = k >= n_warm_turns(run, n_warm)
            if agree is not None:
                agree.visit(drafters, turn, run.max_new_tokens, count=measured)
                continue
            row = []
            for n, d in drafters.items():
                steps = replay(d, turn.prompt, turn.output, run.max_new_tokens, run.budget)
                if n == "recorded" and turn.recorded and measured:
                    got = [s.committed for s in steps]
                    if got != turn.recorded:
                        print(f"  recorded mismatch {turn.id} turn {turn.turn}: replayed "
                              f"{sum(got)}/{len(got)} vs recorded "
                              f"{sum(turn.recorded)}/{len(turn.recorded)}")  # fmt: skip
                if measured:
                    tallies[n].add(steps)
                    row.append(f"{n} {mat(steps):.3f} ({len(steps)} steps)")
            if per_prompt is not None and measured:
                per_prompt(f"  {run.name} {turn.id} t{turn.turn} len {len(turn.output)}: "
                           + ", ".join(row))  # fmt: skip
        if agree is not None:
            agree.report(run.name)
        out[run.name] = tallies
    return out


def n_warm_turns(run: Run, warmup: int) -> int:
    ok = [r for r in run.records if r.get("status") == "ok"]
    return sum(len(r["baseline"]["turns"]) for r in ok[:warmup])


class AgreementTally:
    """Drafts at every output position: equal to the first drafter's, and equal acceptance."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        self.positions = 0
        self.same_draft = dict.fromkeys(names[1:], 0)
        self.same_accept = dict.fromkeys(names[1:], 0)

    def visit(self, drafters: dict[str, Replayable], turn: Turn, max_new: int, count: bool) -> None:
        for d in drafters.values():
            d.start(list(turn.prompt))
        for pos in range(1, len(turn.output)):
            context = [*turn.prompt, *turn.output[:pos]]
            max_depth = max(max_new - pos - 1, 0)
            left = turn.output[pos:]
            got = {}
            for n, d in drafters.items():
                draft = prune_lists(*d.draft(context, max_depth), BIG_BUDGET, max_depth)
                tokens, parents = draft.tokens.tolist(), draft.parents.tolist()
                got[n] = (tokens, parents, len(accepted_path(tokens, parents, left)))
            for d in drafters.values():
                d.commit(left[:1], [])
            if not count:
                continue
            self.positions += 1
            first = got[self.names[0]]
            for n in self.names[1:]:
                self.same_draft[n] += got[n][:2] == first[:2]
                self.same_accept[n] += got[n][2] == first[2]

    def report(self, run: str) -> None:
        for n in self.names[1:]:
            print(f"{run}: {n} vs {self.names[0]}: same draft at {self.same_draft[n]}/"
                  f"{self.positions} positions, same accepted length at "
                  f"{self.same_accept[n]}/{self.positions}")  # fmt: skip


def print_table(results: dict[str, dict[str, Tally]], names: Sequence[str]) -> None:
    head = "| run | " + " | ".join(f"{n} MAT" for n in names)
    ratios = [f"{names[0]} / {n}" for n in names[1:]]
    print(head + "".join(f" | {r}" for r in ratios) + " |")
    print("|---" * (1 + len(names) + len(ratios)) + "|")
    total = {n: Tally() for n in names}
    for run, tallies in [*results.items(), ("all", total)]:
        if run != "all":
            for n in names:
                total[n].steps += tallies[n].steps
                total[n].tokens += tallies[n].tokens
        cells = [f"{tallies[n].mat:.3f}" for n in names]
        cells += [f"{tallies[names[0]].mat / tallies[n].mat:.4f}" for n in names[1:]]
        print(f"| {run} | " + " | ".join(cells) + " |")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path, help="run folders (prompts.jsonl, manifest)")
    p.add_argument("--drafters", default="suffix,suffix-arctic", help="comma-separated")
    p.add_argument("--data-dir", default=None, help="default: $RACER_BENCH_DATA")
    p.add_argument("--warmup", type=int, default=None, help="default: the run's warmup_prompts")
    p.add_argument("--per-prompt", action="store_true", help="print each turn's MAT")
    p.add_argument("--agreement", action="store_true", help="compare drafts at every position")
    p.add_argument("--max-spec-tokens", type=int, default=64)
    p.add_argument("--max-tree-depth", type=int, default=64)
    p.add_argument("--max-spec-factor", type=float, default=1.0)
    p.add_argument("--max-spec-offset", type=float, default=0.0)
    p.add_argument("--min-token-prob", type=float, default=0.1)
    p.add_argument("--max-cached-requests", type=int, default=100000)
    p.add_argument("--chain", action="store_true", help="suffix: use_tree_spec=false")
    p.add_argument("--sam-capacity", type=int, default=39)
    p.add_argument("--sam-alpha", type=float, default=4.0)
    p.add_argument(
        "--sam-reference", default=None, help="SAM-Decoding's samd_sam_only/sam/dyn_sam.py"
    )
    p.add_argument("--pld", default="1,3,10", help="pld: min n-gram, max n-gram, chain length")
    p.add_argument("--batch-size", type=int, default=1, help="vLLM runs: records of this size")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, dict[str, Tally]]:
    args = parse_args(argv)
    names = [n.strip() for n in args.drafters.split(",") if n.strip()]
    suffix = SuffixSettings(args.max_spec_tokens, args.max_tree_depth, args.max_spec_factor,
                            args.max_spec_offset, args.min_token_prob, args.max_cached_requests,
                            not args.chain)  # fmt: skip
    low, high, k = (int(v) for v in args.pld.split(","))
    opts = Options(suffix, args.sam_capacity, args.sam_alpha, args.sam_reference, (low, high, k))
    runs = [load_run(folder, args.data_dir, args.batch_size) for folder in args.runs]
    results = simulate(runs, names, opts, args.warmup, print if args.per_prompt else None,
                       args.agreement)  # fmt: skip
    if not args.agreement:
        print_table(results, names)
    return results


if __name__ == "__main__":
    main()
