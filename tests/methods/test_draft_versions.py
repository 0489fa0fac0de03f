"""A drafter's ``version`` names its drafts: same version, same drafts on the same inputs.

Every method YAML of ``conf/method/`` that runs in the native loop (``METHODS`` of the
conformance tests: vLLM's own proposers are left out) is built as the conformance tests build
it (tiny random target, CPU sizes, ``scheduler=fixed``, eager engine; untrained heads and the
SpS draft model random but seeded by the YAML) and decodes ``TINY_PROMPTS`` greedily through the
one decode loop. Every draft it proposes (tokens, parents and sources, in order, per prompt) is
serialised canonically and hashed; ``draft_versions.json`` records, per method,
``{"version": <drafter.version>, "drafts_sha256": <hex>}``. The test fails when

* the drafts changed but the version did not: bump the drafter's ``version``, then update;
* the version changed but the table did not, a method has no entry, or its hash is ``null``
  (not recorded yet): update.

Update (after bumping the version of any method whose drafts changed)::

    pytest tests/methods/test_draft_versions.py --update-draft-versions

rewrites the entries of the methods it runs (``-k <method>`` for one); it still refuses to
record new drafts under an unchanged version. When the inputs change rather than a drafter (new
``TINY_PROMPTS``, or a torch or transformers release that initialises the random tiny model
differently: every hash moves at once), set the hashes to ``null`` and update.

Determinism: one torch thread, the tiny target in float64 (argmax gaps far above reduction-order
noise), deterministic algorithms (``tests/conftest.py``), the fixed scheduler (no timing in the
loop), seeded random heads and draft model, and REST's datastore built from the prompts (its
default corpus, the Python standard library, differs per Python version). No method is left
out for nondeterminism.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from racer_bench.engine.structs import Draft
from racer_bench.engine.target import HFTarget
from tests.conftest import CONF_DIR, TINY_PROMPTS, ar_tokens, run_generate
from tests.methods.test_conformance import METHODS, BudgetSpy, make_drafter

TABLE = Path(__file__).with_name("draft_versions.json")
UPDATE = "pytest tests/methods/test_draft_versions.py --update-draft-versions"
MAX_NEW_TOKENS = 48
ComposeCfg = Callable[..., DictConfig]  # the compose_cfg fixture


def fixed_datastore(target: HFTarget, folder: Path) -> str:
    """REST's datastore: the tiny prompts and their greedy continuations (its default corpus,
    the Python standard library, differs per Python version)."""
    from methods.common.datastore import Datastore, separator_for, token_dtype

    vocab = target.vocab_size
    separator = separator_for(vocab)
    texts = [[*p, *ar_tokens(target, list(p), max_new_tokens=MAX_NEW_TOKENS)] for p in TINY_PROMPTS]
    tokens = [t for text in texts for t in [*text, separator]]
    store = Datastore.from_tokens(np.array(tokens, token_dtype(vocab)), separator,
                                  {"vocab_size": vocab})  # fmt: skip
    return str(store.save(folder / "tiny.npz"))


def canonical(draft: Draft) -> dict[str, list[int] | None]:
    """The parts of a draft that name it: tokens, parents and sources (None: unlabelled)."""
    return {
        "tokens": draft.tokens.tolist(),
        "parents": draft.parents.tolist(),
        "sources": draft.source.tolist() if draft.source is not None else None,
    }


def drafts_record(
    compose_cfg: ComposeCfg, method: str, target: HFTarget, folder: Path
) -> dict[str, str]:
    """``{"version", "drafts_sha256"}`` of ``method``'s drafts on the tiny prompts."""
    torch.set_num_threads(1)
    overrides = ["engine=eager"]
    if method == "rest":
        overrides.append(f"method.datastore={fixed_datastore(target, folder)}")
    spy = BudgetSpy(make_drafter(compose_cfg, method, target, "cpu", *overrides))
    per_prompt = []
    for prompt in TINY_PROMPTS:
        start = len(spy.drafts)
        run_generate(target, spy, list(prompt), max_new_tokens=MAX_NEW_TOKENS)
        per_prompt.append([canonical(draft) for _, draft in spy.drafts[start:]])
    blob = json.dumps(per_prompt, sort_keys=True, separators=(",", ":")).encode()
    return {"version": str(spy.inner.version), "drafts_sha256": hashlib.sha256(blob).hexdigest()}


def read_table() -> dict[str, dict[str, Any]]:
    return json.loads(TABLE.read_text(encoding="utf-8"))


def write_table(table: dict[str, dict[str, Any]]) -> None:
    TABLE.write_text(json.dumps(table, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def stale(method: str, recorded: dict[str, Any] | None, version: str) -> str | None:
    """Why the table's entry is not at ``version`` (None: it is)."""
    if recorded is None:
        return f"{method}: not in {TABLE.name}; run {UPDATE}"
    if recorded["version"] != version:
        return (f"{method}: version {version}, {TABLE.name} records {recorded['version']}; "
                f"run {UPDATE}")  # fmt: skip
    return None


@pytest.mark.parametrize("method", METHODS)
def test_drafts_change_only_with_the_version(
    method: str, compose_cfg: ComposeCfg, tiny_target: HFTarget, tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    now = drafts_record(compose_cfg, method, tiny_target, tmp_path)
    table = read_table()
    recorded = table.get(method)
    reason = stale(method, recorded, now["version"])
    old_hash = recorded.get("drafts_sha256") if recorded else None
    if reason is None and old_hash == now["drafts_sha256"]:
        return
    if reason is None and old_hash is not None:
        pytest.fail(f"{method}: drafts changed; bump its version and run {UPDATE}")
    if not request.config.getoption("--update-draft-versions"):
        pytest.fail(reason or f"{method}: drafts not recorded yet (drafts_sha256 null); "
                    f"run {UPDATE}")  # fmt: skip
    table[method] = now
    write_table(table)


def test_the_table_names_every_method_at_its_version(request: pytest.FixtureRequest) -> None:
    """Without decoding: the table's methods are ``METHODS``, each at its drafter's version
    (the update drops the entries of methods that are gone)."""
    table = read_table()
    gone = sorted(set(table) - set(METHODS))
    if gone and request.config.getoption("--update-draft-versions"):
        write_table({m: e for m, e in table.items() if m in METHODS})
    elif gone:
        pytest.fail(f"{TABLE.name} lists methods that are gone: {gone}; run {UPDATE}")
    for method in METHODS:
        target = OmegaConf.load(CONF_DIR / "method" / f"{method}.yaml")["_target_"]
        reason = stale(method, table.get(method), str(get_class(target).version))
        assert reason is None, reason
