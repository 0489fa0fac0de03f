"""The vLLM engines' CPU binding and dtype (pure: CPU lists, fingerprint flags, cache files)."""

from __future__ import annotations

import pytest

from racer_bench.errors import ConfigError
from racer_bench.vllm_backend.cpu import (
    BIND_ENV,
    RESERVED_ENV,
    bind_string,
    choose_dtype,
    core_of,
    id_list,
    one_per_core,
    thread_binding,
)


def test_id_lists_use_vllms_range_syntax():
    assert id_list([0, 1]) == "0-1"
    assert id_list([9, 8, 6, 3, 2, 1, 0]) == "0-3,6,8-9"
    assert id_list([5]) == "5"
    assert id_list([1, 3]) == "1,3"


def test_bind_strings_give_each_worker_a_contiguous_group():
    assert bind_string([0, 1]) == "0-1"
    assert bind_string([0, 1, 2, 3, 4], workers=2) == "0-2|3-4"
    assert bind_string([0, 2, 4, 6], workers=2) == "0,2|4,6"
    with pytest.raises(ConfigError, match="no CPU is left"):
        bind_string([])
    with pytest.raises(ConfigError, match="tensor_parallel_size=3"):
        bind_string([0, 1], workers=3)


def test_one_thread_per_physical_core():
    siblings = {0: "a", 1: "b", 2: "a", 3: "b"}  # 2 cores with 2 SMT threads each
    assert one_per_core([3, 2, 1, 0], siblings.__getitem__) == [0, 1]
    assert one_per_core([0, 1], lambda cpu: cpu) == [0, 1]  # no SMT: every CPU


def test_core_of_reads_the_topology_and_falls_back_to_the_cpu(tmp_path):
    topology = tmp_path / "cpu3" / "topology"
    topology.mkdir(parents=True)
    (topology / "physical_package_id").write_text("0\n")
    (topology / "core_id").write_text("1\n")
    assert core_of(3, tmp_path) == ("0", "1")
    assert core_of(4, tmp_path) == ("cpu", 4)


def test_usable_binds_every_core_and_reserves_nothing_in_vllm():
    binding = thread_binding("usable", None, [0, 1])
    assert binding["env"] == {BIND_ENV: "0-1"}  # RESERVED_ENV unset: vLLM ignores it for lists
    assert binding["omp_threads"] == 2 and binding["reserved_cpus"] == 0
    held = thread_binding("usable", 1, [0, 1])  # vLLM's own choice, through an explicit list
    assert held["env"] == {BIND_ENV: "0"} and held["omp_threads"] == 1
    with pytest.raises(ConfigError, match="no CPU is left"):
        thread_binding("usable", 2, [0, 1])


def test_vllms_own_modes_pass_through():
    assert thread_binding("auto", None, [0, 1])["env"] == {BIND_ENV: "auto"}
    auto = thread_binding("auto", 0, [0, 1])
    assert auto["env"] == {BIND_ENV: "auto", RESERVED_ENV: "0"}
    assert auto["omp_threads"] is None  # vLLM decides
    assert thread_binding("0-1", None, [0, 1, 2, 3])["env"] == {BIND_ENV: "0-1"}


def test_dtype_is_the_requested_then_the_models_then_float32():
    assert choose_dtype("bfloat16", "float32")[0] == "bfloat16"
    assert choose_dtype("auto", "float16")[0] == "float16"
    dtype, why = choose_dtype("auto", "auto")
    assert dtype == "float32" and "equal its AR" in why
    assert choose_dtype("auto", None)[0] == "float32"
    assert choose_dtype("auto", "float64")[0] == "float32"  # vLLM has no float64
