"""The single decode loop: propose -> schedule -> verify forward -> verify -> commit -> update.

Every method runs through :func:`generate`, the autoregressive baseline included (a drafter that
proposes nothing), so speedups compare like with like.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from racer_bench.engine.drafter import Drafter
from racer_bench.engine.schedule.scheduler import FixedScheduler, Plan, Scheduler
from racer_bench.engine.stopping import StopRule
from racer_bench.engine.structs import Draft, DraftContext, Feedback, GenerationResult, StepRecord
from racer_bench.engine.target import HFTarget
from racer_bench.engine.timing import SyncedClock
from racer_bench.engine.tree import check_draft, node_depths, prune
from racer_bench.engine.verify import Verifier

Observer = Callable[[StepRecord, list[int]], None]
RETRIEVAL_SOURCES = frozenset({1})  # Source.RETRIEVAL


@dataclass
class LoopOptions:
    """Run-level loop settings.

    Attributes:
        max_draft: hard cap on draft nodes per step, on top of the drafter's own capacity.
        check_drafts: validate every draft's tree contract (tests; cheap but not free).
    """

    max_draft: int = 256
    check_drafts: bool = False


def generate(
    target: HFTarget,
    drafter: Drafter,
    verifier: Verifier,
    prompt_ids: list[int],
    stop: StopRule,
    rng: torch.Generator,
    options: LoopOptions | None = None,
    observers: Sequence[Observer] = (),
    scheduler: Scheduler | None = None,
) -> GenerationResult:
    """Generate a continuation of ``prompt_ids`` (batch size 1).

    ``scheduler`` chooses the verified part of every draft (default: all of it).
    """
    loop = _Loop(target, drafter, verifier, stop, rng, options or LoopOptions(),
                 scheduler or FixedScheduler())  # fmt: skip
    t0 = loop.clock.now()
    first, root_topk, prompt_hidden = loop.prefill(prompt_ids)
    tokens = [*prompt_ids, first]
    generated: list[int] = []
    n_keep, reason = stop.cut(generated, [first])
    generated += [first][:n_keep]
    t1 = loop.clock.now()
    steps: list[StepRecord] = []
    while reason is None:
        if len(tokens) + 1 >= target.max_length:
            reason = "context"
            break
        record, committed, root_topk = loop.step(tokens, generated, root_topk, prompt_hidden)
        prompt_hidden = None  # only the first step's context carries the prompt's features
        n_keep, reason = stop.cut(generated, committed)
        record.n_committed = n_keep
        record.cut_accepted(n_keep)
        generated += committed[:n_keep]
        tokens += committed[:n_keep]
        steps.append(record)
        for observer in observers:
            observer(record, committed[:n_keep])
    t2 = loop.clock.now()
    text = target.tokenizer.decode(generated, skip_special_tokens=True)
    return GenerationResult(
        tokens=generated,
        text=stop.clean_text(text),
        prefill_time=t1 - t0,
        decode_time=t2 - t1,
        steps=steps,
        stop_reason=reason,
    )


@dataclass
class _Loop:
    """The pieces one generation call threads through every step."""

    target: HFTarget
    drafter: Drafter
    verifier: Verifier
    stop: StopRule
    rng: torch.Generator
    options: LoopOptions
    scheduler: Scheduler

    def __post_init__(self) -> None:
        self.clock = SyncedClock(self.target.synchronize)
        self.needs = self.drafter.needs

    def prefill(
        self, prompt_ids: list[int]
    ) -> tuple[int, torch.Tensor | None, torch.Tensor | None]:
        """Cache the prompt, reset drafter and verifier; return (first token, root topk, hidden)."""
        needs, k = self.needs, self.needs.topk
        prompt_hidden = None
        if needs.hidden_states:
            logits, prompt_hidden = self.target.prefill_with_hidden(
                prompt_ids, needs.prefill_topk, hidden_layers=needs.hidden_layers
            )
        else:
            logits = self.target.prefill(prompt_ids, all_logits=needs.prefill_topk)
        self.drafter.reset(prompt_ids, logits.topk(k).indices if needs.prefill_topk else None)
        self.verifier.reset()
        self.scheduler.reset()
        first = self.verifier.verify(Draft.empty(), logits[-1:], self.rng).bonus
        return first, logits[-1].topk(k).indices if k else None, prompt_hidden

    def step(
        self,
        tokens: list[int],
        generated: list[int],
        root_topk: torch.Tensor | None,
        prompt_hidden: torch.Tensor | None = None,
    ) -> tuple[StepRecord, list[int], torch.Tensor | None]:
        """One propose/verify/commit/update step; returns (record, committed, new root top-k)."""
        target, options, clock, needs = self.target, self.options, self.clock, self.needs
        room = min(self.stop.max_new_tokens - len(generated), target.max_length - len(tokens) - 1)
        max_depth = max(room - 1, 0)  # accepted + bonus must fit in the room left
        budget = min(options.max_draft, self.scheduler.candidate_budget() or options.max_draft)
        ctx = DraftContext(tokens, tokens[-1], budget, max_depth, root_topk, prompt_hidden)
        t0 = clock.now()
        draft = prune(self.drafter.propose(ctx), budget, max_depth)
        plan = self.scheduler.schedule(draft)
        draft = plan.draft
        t1 = clock.now()
        if options.check_drafts:
            check_draft(draft, options.max_draft)
        past = target.length
        # timed only for a scheduler that follows the machine: waiting for the device after
        # the forward would hold back the verifier's launches on an accelerator
        start = clock.now() if self.scheduler.times_forwards else None
        out = target.forward_tree(ctx.root, draft, needs.hidden_states, needs.hidden_layers)
        t_forward = clock.now() - start if start is not None else None
        result = self.verifier.verify(draft, out.logits, self.rng)
        target.commit(past, result.accepted)
        # the aux branch's argmax is target work (like the verifier's), so it is verify time
        aux_argmax = out.aux_logits.argmax(-1) if out.aux_logits is not None else None
        t2 = clock.now()
        node_tokens = draft.tokens.tolist()
        committed = [node_tokens[i] for i in result.accepted] + [result.bonus]
        node_topk, new_root_topk = self._topk(out.logits, result.accepted)
        hidden = out.hidden[: len(draft) + 1] if out.hidden is not None else None
        self.drafter.update(
            Feedback(draft, result.accepted, committed, node_topk, aux_argmax, hidden)
        )
        self.scheduler.learn(plan, result.accepted, committed, t_forward)
        t3 = clock.now()
        record = _record(draft, result.accepted, t1 - t0, t2 - t1, t3 - t2)
        record.n_relaxed, record.regret = result.n_relaxed, result.regret
        _add_plan(record, plan, result.accepted)
        return record, committed, new_root_topk

    def _topk(
        self, logits: torch.Tensor, accepted: list[int]
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """(top-k at every row if the drafter wants it, top-k of the bonus row = next root)."""
        k = self.needs.topk
        if not k:
            return None, None
        row = accepted[-1] + 1 if accepted else 0
        if self.needs.node_topk:
            node_topk = logits.topk(k).indices  # [N+1, k]
            return node_topk, node_topk[row]
        return None, logits[row].topk(k).indices


def _add_plan(record: StepRecord, plan: Plan, accepted: list[int]) -> None:
    """The scheduler's side of a step record: candidates, prediction, cost, calibration pairs."""
    record.n_candidates = plan.n_candidates
    record.predicted_accepted = plan.predicted_accepted
    record.cost = plan.cost
    if plan.survival:
        on_path = set(accepted)
        record.calibration = [(s, int(i in on_path)) for i, s in enumerate(plan.survival)]


def _record(
    draft: Draft, accepted: list[int], t_draft: float, t_verify: float, t_update: float
) -> StepRecord:
    """Step counters from a draft and its accepted path."""
    sources = draft.source.tolist() if draft.source is not None else [0] * len(draft)
    ranks = draft.rank.tolist() if draft.rank is not None else []
    return StepRecord(
        n_draft=len(draft),
        depth=max(node_depths(draft.parents.tolist()), default=0),
        n_accepted=len(accepted),
        n_committed=len(accepted) + 1,
        accepted_sources=[sources[i] for i in accepted],
        has_retrieval=any(s in RETRIEVAL_SOURCES for s in sources),
        t_draft=t_draft,
        t_verify=t_verify,
        t_update=t_update,
        accepted_ranks=[ranks[i] for i in accepted if ranks and ranks[i] >= 0],
        meta=dict(draft.meta),
    )
