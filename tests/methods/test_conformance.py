"""Every method YAML in conf/method/ on the tiny model: lossless, within budget, reusable."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hydra.utils import get_object, instantiate
from omegaconf import OmegaConf

from methods.common.heads.layers import for_inference
from methods.dspark.head import pass_last_feature
from racer_bench.config.construct import constructor_node
from racer_bench.engine.drafter import runs_on
from racer_bench.engine.schedule.cost import CostProfile, synthetic
from racer_bench.engine.schedule.scheduler import ConfidenceOptions, ConfidenceScheduler
from racer_bench.engine.structs import Draft, DraftContext
from tests.conftest import CONF_DIR, TINY_PROMPTS, ar_tokens, run_generate

VLLM_ONLY = "racer_bench.vllm_backend."  # vLLM's own proposers: tests/vllm/ covers them


def runs_in_our_loop(path) -> bool:
    """Whether the method YAML at ``path`` names a drafter our decode loop runs: not one of
    vLLM's own proposers (tests/vllm/) and not one whose ``needs.backends`` leaves out
    ``native`` (llama.cpp's own lookup: tests/llamacpp/)."""
    target = OmegaConf.load(path)["_target_"]
    return not target.startswith(VLLM_ONLY) and runs_on(get_object(target), "native")


METHODS = sorted(p.stem for p in (CONF_DIR / "method").glob("*.yaml") if runs_in_our_loop(p))


def make_drafter(compose_cfg, method: str, target, hardware: str = "cpu", *overrides: str):
    """The method's drafter at ``hardware``'s fixed sizes, unless ``overrides`` name a scheduler."""
    named = any(o.startswith("scheduler=") for o in overrides)
    fixed = () if named else ("scheduler=fixed",)
    cfg = compose_cfg(f"method={method}", "model=tiny_random", f"hardware={hardware}", *fixed,
                      *overrides)  # fmt: skip
    return instantiate(constructor_node(cfg.method))(vocab_size=target.vocab_size)


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


TARGETS = {"eager": "tiny_target", "fast": "tiny_fast_target", "fast-bf16": "tiny_bf16_target"}


@pytest.mark.parametrize(
    ("hardware", "engine"),
    [("cpu", "eager"), ("gpu", "eager"), ("cpu", "fast"), ("gpu", "fast-bf16")],
)  # CPU- and GPU-sized draft defaults; the fast engine's cache and row-invariant kernels,
# in bfloat16 with GPU-sized trees (exact only because a tree row equals the AR row)
@pytest.mark.parametrize("method", METHODS)
def test_method_is_lossless_and_within_budget(method, hardware, engine, compose_cfg, request):
    tiny_target = request.getfixturevalue(TARGETS[engine])
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
        scheduler = ConfidenceScheduler(profile, ConfidenceOptions(prior_mean=0.6))
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


# A tiny model whose greedy text falls into short cycles (a small init std makes each next token
# depend mostly on the last few), and a prompt ending in its own cyclic continuation: every
# drafter that proposes anything sensible gets some of it accepted.
PREDICTABLE_STD = 0.1
PREDICTABLE_BASE = b"the cat sat on the mat. " * 4


@pytest.fixture(scope="module")
def predictable_target():
    from racer_bench.models.loaders import tiny_random

    return tiny_random(init_std=PREDICTABLE_STD)


def start_heads_from_the_target(drafter, target) -> None:
    """Untrained model heads (``checkpoint: null``) start as the target's own LM head, as a
    trained head's would: fused features pass the last feature layer through, every residual
    branch is zero, the LM head is the target's (Medusa's initialisation)."""
    weight = target.model.get_output_embeddings().weight
    size = weight.shape[1]
    width = size * max(len(drafter.needs.hidden_layers), 1)  # Medusa: the final state only
    drafter.head = head = for_inference(drafter._random_head(width), drafter.engine)
    with torch.no_grad():
        if drafter.name == "dspark":
            pass_last_feature(head)
            head.markov_out.weight.zero_()
        if drafter.name == "eagle3":
            head.fc.weight.zero_()
            head.fc.weight[:, -size:] = torch.eye(size)
            head.midlayer.self_attn.o_proj.weight.zero_()
            head.midlayer.mlp["down_proj"].weight.zero_()
        head.lm_head.weight.copy_(weight.to(head.lm_head.weight.dtype))


def predictable_datastore(target, prompt: list[int], folder) -> str:
    """A REST datastore holding ``prompt`` and its greedy continuation."""
    from methods.common.datastore import Datastore, separator_for, token_dtype

    vocab = target.vocab_size
    tokens = np.array(prompt + ar_tokens(target, prompt, max_new_tokens=64), token_dtype(vocab))
    store = Datastore.from_tokens(tokens, separator_for(vocab), {"vocab_size": vocab})
    return str(store.save(folder / "predictable.npz"))


@pytest.mark.parametrize("method", [m for m in METHODS if m != "ar"])  # ar drafts nothing
def test_method_accepts_drafts_on_predictable_text(
    method, compose_cfg, predictable_target, tmp_path
):
    """A drafter that quietly proposes nothing (or nothing useful) fails here."""
    target = predictable_target
    base = list(PREDICTABLE_BASE)
    prompt = base + ar_tokens(target, base, max_new_tokens=64)
    overrides = ["engine=eager"]  # heads keep plain weights, so they can start from the target
    if method == "sps":  # the draft model is the target itself
        overrides += [
            f"+method.draft_model.init_std={PREDICTABLE_STD}",
            "method.draft_model.seed=0",
        ]
    if method == "rest":  # a datastore of the same text (REST never reads the prompt)
        overrides.append(f"method.datastore={predictable_datastore(target, prompt, tmp_path)}")
    drafter = make_drafter(compose_cfg, method, target, "cpu", *overrides)
    if method in ("medusa", "eagle3", "dspark"):
        start_heads_from_the_target(drafter, target)
    result = run_generate(target, drafter, prompt, max_new_tokens=48)
    assert result.tokens == ar_tokens(target, prompt, max_new_tokens=48)
    accepted = sum(step.n_accepted for step in result.steps)
    assert sum(step.n_draft for step in result.steps) > 0, f"{method} proposed nothing"
    assert accepted >= 1, f"{method} accepted no drafted token on predictable text"
