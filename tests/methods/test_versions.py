"""A drafter's ``version`` changes whenever its default drafts change.

Each method's default drafts on the tiny model (every token and parent of every draft, hashed)
and its MAT are recorded here with the method's version. A change of defaults or code that
changes the drafts fails this test until the method's ``version`` is bumped (so records of the
old drafts are not mixed with the new under one version) and the record below is updated.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from tests.conftest import TINY_PROMPTS, ar_tokens, run_generate
from tests.methods.test_conformance import METHODS, BudgetSpy, make_drafter

# method: (version, MAT on TINY_PROMPTS with 48 new tokens each, hash of the drafts)
RECORDED: dict[str, tuple[str, float, str]] = {
    "ar": ("1", 1.0, "9e4830f2021a6490"),  # no drafts
    "dspark": ("3", 1.0173, "890627f4a2b76ab7"),
    "eagle3": ("1", 1.0043, "3e97d2510a4afbe8"),
    "logitspec": ("1", 1.0444, "45adde3d9510d21a"),
    "lookahead": ("1", 1.0262, "64e68e2c78b9485a"),
    "medusa": ("1", 1.0129, "fd3d7fbf79320284"),
    "pld": ("1", 1.0086, "53fd114f7631122b"),
    "racer": ("2", 1.088, "67e4bc3703dd7053"),  # 2: best-first tree by default
    "recycling": ("1", 1.0398, "c841b445f40f8405"),
    "rest": ("1", 3.9167, "8684b85c5570c2d6"),
    "sam": ("1", 1.0086, "01778578d44958b3"),
    "sps": ("1", 1.0, "d6d52a9fcb1c6151"),
    "suffix": ("1", 1.0086, "67686cac508922be"),
}


def fixed_datastore(target, folder) -> str:
    """REST's datastore: the tiny prompts and their greedy continuations (its default corpus,
    the Python standard library, differs per Python version)."""
    from methods.datastore import Datastore, separator_for, token_dtype

    vocab = target.vocab_size
    separator = separator_for(vocab)
    texts = [[*p, *ar_tokens(target, list(p), max_new_tokens=48)] for p in TINY_PROMPTS]
    tokens = [t for text in texts for t in [*text, separator]]
    store = Datastore.from_tokens(np.array(tokens, token_dtype(vocab)), separator,
                                  {"vocab_size": vocab})  # fmt: skip
    return str(store.save(folder / "tiny.npz"))


def draft_record(compose_cfg, method: str, target, folder) -> tuple[str, float, str]:
    overrides = ["engine=eager"]
    if method == "rest":
        overrides.append(f"method.datastore={fixed_datastore(target, folder)}")
    drafter = BudgetSpy(make_drafter(compose_cfg, method, target, "cpu", *overrides))
    digest = hashlib.sha256()
    steps = committed = 0
    for prompt in TINY_PROMPTS:
        result = run_generate(target, drafter, list(prompt), max_new_tokens=48)
        steps += len(result.steps)
        committed += sum(step.n_committed for step in result.steps)
    for _, draft in drafter.drafts:
        digest.update(repr((draft.tokens.tolist(), draft.parents.tolist())).encode())
    return str(drafter.inner.version), round(committed / steps, 4), digest.hexdigest()[:16]


@pytest.mark.parametrize("method", METHODS)
def test_version_changes_when_the_default_drafts_change(method, compose_cfg, tiny_target, tmp_path):
    version, mat, digest = draft_record(compose_cfg, method, tiny_target, tmp_path)
    recorded = RECORDED.get(method)
    assert recorded is not None, f"record {method}: {(version, mat, digest)!r}"
    if version == recorded[0]:
        assert (mat, digest) == recorded[1:], (
            f"{method} drafts differently from its version {version}: bump {method}'s version "
            f"and record {(version, mat, digest)!r}"
        )
    else:
        pytest.fail(f"{method} is now version {version}: record {(version, mat, digest)!r}")
