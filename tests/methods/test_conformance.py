"""Every method YAML in conf/method/ on the tiny model: lossless, within budget, reusable."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate

from racer_bench.engine.cost import CostProfile, synthetic
from racer_bench.engine.scheduler import ConfidenceScheduler
from racer_bench.engine.structs import Draft, DraftContext
from tests.conftest import CONF_DIR, TINY_PROMPTS, ar_tokens, run_generate

VLLM_ONLY = "racer_bench.vllm_backend."  # vLLM's own proposers: tests/vllm/ covers them
METHODS = sorted(
    p.stem for p in (CONF_DIR / "method").glob("*.yaml") if VLLM_ONLY not in p.read_text()
)


def make_drafter(compose_cfg, method: str, target, hardware: str = "cpu", *overrides: str):
    cfg = compose_cfg(f"method={method}", "model=tiny_random", f"hardware={hardware}", *overrides)
    return instantiate(cfg.method)(vocab_size=target.vocab_size)


class BudgetSpy:
    """Wraps a drafter and records every draft it proposes."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.needs = inner.needs
        self.drafts: list[tuple[DraftContext, Draft]] = []

    def reset(self, prompt_ids, prompt_topk) -> None:
        self.inner.reset(prompt_ids, prompt_topk)

    def propose(self, ctx: DraftContext) -> Draft:
        draft = self.inner.propose(ctx)
        self.drafts.append((ctx, draft))
        return draft

    def update(self, fb) -> None:
        self.inner.update(fb)


@pytest.mark.parametrize(
    ("hardware", "engine"), [("cpu", "eager"), ("gpu", "eager"), ("cpu", "fast")]
)  # CPU- and GPU-sized draft defaults; the fast engine's cache and grouped attention
@pytest.mark.parametrize("method", METHODS)
def test_method_is_lossless_and_within_budget(method, hardware, engine, compose_cfg, request):
    tiny_target = request.getfixturevalue("tiny_fast_target" if engine == "fast" else "tiny_target")
    drafter = BudgetSpy(make_drafter(compose_cfg, method, tiny_target, hardware))
    capacity = getattr(drafter.inner, "capacity", None)
    for prompt_bytes in TINY_PROMPTS:  # several prompts: reset between them must work
        prompt = list(prompt_bytes)
        expected = ar_tokens(tiny_target, prompt, max_new_tokens=48)
        result = run_generate(tiny_target, drafter, prompt, max_new_tokens=48)
        assert result.tokens == expected, f"{method} differs from AR on {prompt_bytes!r}"
        for step in result.steps:
            assert 0 <= step.n_accepted <= step.depth <= step.n_draft
            assert 1 <= step.n_committed <= step.n_accepted + 1
    assert capacity is not None, f"{method}: drafter must expose .capacity"
    for ctx, draft in drafter.drafts:
        assert len(draft) <= capacity
        assert len(draft) <= ctx.budget
        parents = draft.parents.tolist()
        assert all(-1 <= p < i for i, p in enumerate(parents))


@pytest.mark.parametrize("method", METHODS)
def test_method_respects_small_budget_and_eos(method, compose_cfg, tiny_target):
    """EOS inside an accepted run and max_new_tokens reached mid-draft cut exactly as AR."""
    drafter = make_drafter(compose_cfg, method, tiny_target)
    prompt = list(TINY_PROMPTS[2])
    free_run = ar_tokens(tiny_target, prompt, max_new_tokens=30)
    eos = {free_run[7]}  # a token AR emits: generation must stop right after it
    expected = ar_tokens(tiny_target, prompt, max_new_tokens=30, eos_ids=eos)
    got = run_generate(tiny_target, drafter, prompt, max_new_tokens=30, eos_ids=eos)
    assert got.tokens == expected
    for n in (1, 2, 5, 13):
        expected = ar_tokens(tiny_target, prompt, max_new_tokens=n)
        got = run_generate(tiny_target, drafter, prompt, max_new_tokens=n)
        assert got.tokens == expected
        for step in got.steps:  # per-source counts are cut with the accepted run
            assert sum(step.accepted_by_source.values()) == step.n_accepted


# Cut curves: flat up to 4 tokens then prohibitive (always the 3 most likely nodes), and a
# gentle slope on which the learnt estimates decide.
CUT_PROFILES = {
    "top3": CostProfile([1, 4, 5], [1.0, 1.0, 100.0]),
    "linear": synthetic("linear:0.02"),
}


@pytest.mark.parametrize("method", METHODS)
def test_method_is_lossless_under_the_confidence_scheduler(method, compose_cfg, tiny_target):
    """scheduler=confidence: GPU-sized candidates, cut per step, output still equals AR."""
    drafter = BudgetSpy(
        make_drafter(compose_cfg, method, tiny_target, "cpu", "scheduler=confidence")
    )
    for name, profile in CUT_PROFILES.items():
        scheduler = ConfidenceScheduler(profile, prior_mean=0.6)
        for prompt_bytes in TINY_PROMPTS[:2]:
            prompt = list(prompt_bytes)
            expected = ar_tokens(tiny_target, prompt, max_new_tokens=24)
            result = run_generate(tiny_target, drafter, prompt, max_new_tokens=24,
                                  scheduler=scheduler)  # fmt: skip
            assert result.tokens == expected, f"{method} ({name}) differs from AR"
            for step in result.steps:
                assert step.n_draft <= step.n_candidates
                assert 0 <= step.n_accepted <= step.depth <= step.n_draft
                if name == "top3" and not step.meta.get("aux_size"):  # aux tokens cost too
                    assert step.n_draft == min(3, step.n_candidates)
                assert len(step.calibration) == step.n_draft
    proposed = max((len(d) for _, d in drafter.drafts), default=0)
    assert proposed <= drafter.inner.capacity
