"""Shared fixtures: the tiny random target, config composition, prompt sets."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from racer_bench.config.paths import CONF_DIR, REPO_ROOT
from racer_bench.engine.decode import LoopOptions, generate
from racer_bench.engine.drafter import Drafter, NullDrafter
from racer_bench.engine.schedule.scheduler import Scheduler
from racer_bench.engine.stopping import StopRule
from racer_bench.engine.structs import GenerationResult
from racer_bench.engine.target import HFTarget
from racer_bench.engine.verify import Verifier
from racer_bench.engine.verify.greedy import GreedyVerifier
from racer_bench.models.loaders import tiny_random
from racer_bench.run import resolvers

REPO = REPO_ROOT
SHARED_DATA = REPO.parent / "shared" / "datasets"

# Byte prompts with repeated phrases, so retrieval-based drafters find matches.
TINY_PROMPTS = [
    b"the cat sat on the mat. the cat sat on the",
    b"def add(a, b):\n    return a + b\n\ndef add(",
    b"abcabcabcabcabc xyz abcabc",
    b"one two three four five one two three",
    b"zzzz",
]

torch.use_deterministic_algorithms(True)

resolvers.register()  # the tests compose conf/, as the command line does


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-draft-versions",
        action="store_true",
        help="record each method's version and drafts hash in tests/methods/draft_versions.json "
        "(tests/methods/test_draft_versions.py)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if "RACER_BENCH_DATA" not in os.environ and SHARED_DATA.exists():
        os.environ["RACER_BENCH_DATA"] = str(SHARED_DATA)


@pytest.fixture(autouse=True, scope="session")
def one_thread() -> Iterator[None]:
    """Tests run thousands of tiny ops: intra-op threads only add synchronisation."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_target() -> HFTarget:
    return tiny_random()


@pytest.fixture(scope="session")
def tiny_fast_target() -> HFTarget:
    """The tiny model on the fast engine, with grouped-query attention (2 KV heads for 4)."""
    target = tiny_random(num_kv_heads=2)
    target.set_engine("fast")
    return target


@pytest.fixture(scope="session")
def tiny_bf16_target() -> HFTarget:
    """The tiny model in bfloat16 on the fast engine (row-invariant kernels), 2 KV heads for 4.

    A small init std keeps logits close, so near-ties are common: only a row-invariant tree
    step keeps methods equal to AR here.
    """
    target = tiny_random(num_kv_heads=2, dtype="bfloat16", init_std=0.05)
    target.set_engine("fast")
    return target


@pytest.fixture
def compose_cfg() -> Callable[..., DictConfig]:
    """Compose the primary config with overrides, as the CLI would (no Hydra run dir)."""

    def _compose(*overrides: str) -> DictConfig:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose(config_name="config", overrides=list(overrides))

    return _compose


def run_generate(
    target: HFTarget,
    drafter: Drafter,
    prompt: list[int],
    max_new_tokens: int = 40,
    eos_ids: set[int] | None = None,
    verifier: Verifier | None = None,
    stop_strings: tuple[str, ...] = (),
    seed: int = 0,
    scheduler: Scheduler | None = None,
) -> GenerationResult:
    """One generation with checks of the draft contract switched on."""
    stop = StopRule(
        eos_ids if eos_ids is not None else set(),
        max_new_tokens,
        stop_strings,
        decode=target.tokenizer.decode,
    )
    rng = torch.Generator().manual_seed(seed)
    return generate(
        target,
        drafter,
        verifier or GreedyVerifier(),
        prompt,
        stop,
        rng,
        LoopOptions(check_drafts=True),
        scheduler=scheduler,
    )


def ar_tokens(target: HFTarget, prompt: list[int], **kwargs) -> list[int]:
    return run_generate(target, NullDrafter(), prompt, **kwargs).tokens
