"""Both vLLM backends' engine pairs come from one plan (:func:`.engines.plan_pair`), checked
without starting an engine: the offline engines are fakes, the servers are never started."""

from __future__ import annotations

import dataclasses
import types
from typing import Any

import pytest

from racer_bench.config.construct import construct
from racer_bench.vllm_backend import engines, offline
from racer_bench.vllm_backend.proposer import SPEC_ENV
from racer_bench.vllm_backend.serving import ServerPair

TASK = types.SimpleNamespace(max_new_tokens=None)  # all plan_pair asks of a task


def plan_for(compose_cfg, target, tmp_path, backend: str, method: str) -> engines.PairPlan:
    cfg = compose_cfg(f"backend={backend}", f"method={method}", "model=tiny_random")
    drafter = construct(cfg.method, "method", vocab_size=target.vocab_size)
    return engines.plan_pair(cfg, tmp_path, TASK, target, drafter)


@pytest.mark.parametrize("method", ["pld", "vllm_ngram"])
def test_an_offline_and_a_served_run_of_a_method_plan_the_same_pair(
    compose_cfg, tiny_target, tmp_path, method
):
    plans = {b: plan_for(compose_cfg, tiny_target, tmp_path, b, method)
             for b in ("vllm", "vllm_serve")}  # fmt: skip
    fields = [f.name for f in dataclasses.fields(engines.PairPlan) if f.name != "backend"]
    offline_plan, served_plan = plans["vllm"], plans["vllm_serve"]
    for name in fields:  # the backend node differs only by the sweep's own keys
        assert getattr(offline_plan, name) == getattr(served_plan, name), name
    assert offline_plan.engine_record(False) == served_plan.engine_record(False)
    assert SPEC_ENV in offline_plan.env and SPEC_ENV not in offline_plan.plain_env
    assert offline_plan.step_log == tmp_path / engines.STEP_LOG


def test_both_engine_pairs_are_built_from_the_plan(compose_cfg, tiny_target, tmp_path,
                                                   monkeypatch):  # fmt: skip
    built: list[tuple[Any, ...]] = []
    monkeypatch.setattr(offline, "make_llm", lambda *args: built.append(args) or args)
    monkeypatch.setattr(offline, "_BASELINES", {})
    plan = plan_for(compose_cfg, tiny_target, tmp_path, "vllm", "pld")
    pair = offline.VllmEngines(plan)
    assert built == [(*plan.build, None), (*plan.build, plan.speculative)]
    assert (pair.env, pair.speculative, pair.k) == (plan.env, plan.speculative, plan.k)
    assert pair.recorded_env() == plan.recorded_env() and pair.log.path == plan.step_log

    plan = plan_for(compose_cfg, tiny_target, tmp_path, "vllm_serve", "pld")
    servers = ServerPair(plan, tmp_path)
    assert servers.envs == plan.served_envs()
    assert SPEC_ENV in servers.envs["method"] and SPEC_ENV not in servers.envs["baseline"]
    assert servers.build == plan.build[1:] and servers.recorded_env() == plan.recorded_env()
    assert servers.speculative == plan.speculative and servers.step_log.path == plan.step_log


def test_only_our_proposer_gets_the_spec_on_a_server(compose_cfg, tiny_target, tmp_path):
    plan = plan_for(compose_cfg, tiny_target, tmp_path, "vllm_serve", "vllm_ngram")
    assert plan.speculative["method"] == "ngram"
    assert all(SPEC_ENV not in env for env in plan.served_envs().values())
