"""Hardware fingerprint and load meter: the /proc parsers, the id, the not-alone warning."""

from __future__ import annotations

import pytest

from racer_bench.system import hardware

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse sse2 fma avx avx2 avx512f avx512_bf16 avx512_vnni

processor\t: 1
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse sse2 amx_tile
"""

TORCH_SHOW = """PyTorch built with:
  - Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605 for Intel(R) 64
  - Intel(R) MKL-DNN v3.12.0 (Git Hash 80afa71049)
  - OpenMP 201511 (a.k.a. OpenMP 4.5)
  - CPU capability usage: AVX512
  - Build settings: BLAS_INFO=mkl, BUILD_TYPE=Release, LAPACK_INFO=mkl, TORCH_VERSION=2.13.0,
"""
PARALLEL = "ATen/Parallel:\n\tat::get_num_threads() : 2\nATen parallel backend: OpenMP\n"


def test_cpuinfo_reads_the_first_processor_only() -> None:
    cpu = hardware.parse_cpuinfo(CPUINFO)
    assert cpu["cpu_model"] == "AMD EPYC 7B13"
    assert cpu["vendor"] == "AuthenticAMD"
    assert "avx512_bf16" in cpu["flags"] and "amx_tile" not in cpu["flags"]


def test_cpuinfo_missing_gives_none_fields() -> None:
    assert hardware.parse_cpuinfo(None) == {"cpu_model": None, "vendor": None, "flags": set()}


@pytest.mark.parametrize(
    ("flags", "isa"),
    [
        ({"avx2", "fma"}, "avx2"),
        ({"avx2", "avx512f"}, "avx512"),
        ({"avx2", "avx512f", "amx_tile", "amx_bf16"}, "amx"),
        ({"sse2"}, "baseline"),
    ],
)
def test_isa_summary_is_the_widest_matrix_isa(flags: set[str], isa: str) -> None:
    assert hardware.isa_summary(hardware.isa_flags(flags)) == isa


def test_isa_flags_cover_the_ones_that_matter() -> None:
    flags = hardware.isa_flags({"avx2", "avx512_bf16"})
    assert set(flags) == {
        "avx2",
        "fma",
        "avx512f",
        "avx512_bf16",
        "avx512_vnni",
        "amx_tile",
        "amx_bf16",
    }
    assert flags["avx2"] and flags["avx512_bf16"] and not flags["avx512f"]


def test_meminfo_and_loadavg() -> None:
    assert hardware.parse_meminfo_gib("MemTotal:       24683664 kB\nMemFree: 1 kB\n") == 23.5
    assert hardware.parse_meminfo_gib("") is None
    assert hardware.parse_loadavg("1.03 0.48 0.19 3/91 3479\n") == [1.03, 0.48, 0.19]
    assert hardware.parse_loadavg(None) is None


def test_proc_stat_aggregate_line() -> None:
    text = "cpu  100 5 50 800 20 1 2 30 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1\n"
    assert hardware.parse_proc_stat(text) == {"total": 1008, "idle": 820, "steal": 30}
    assert hardware.parse_proc_stat("intr 1\n") is None


def test_torch_config_parse() -> None:
    info = hardware.parse_torch_config(TORCH_SHOW, PARALLEL)
    assert info["blas"] == "mkl" and info["lapack"] == "mkl"
    assert info["openmp"] == "OpenMP 201511"
    assert info["mkl"] == "2024.2"
    assert info["onednn"] == "v3.12.0"
    assert info["cpu_capability"] == "AVX512"
    assert info["parallel_backend"] == "OpenMP"


def _fp(**over: object) -> dict:
    fp = {
        "cpu_model": "AMD EPYC 7B13",
        "isa": "avx2",
        "usable_cpus": 2,
        "memory_gib": 23.5,
        "torch": "2.13.0",
        "blas_info": {"blas": "mkl"},
        "gpu": None,
        "threads": 2,
        "numpy": "2.0",
        "python": "3.11",
    }
    fp.update(over)
    return fp


def test_id_changes_with_what_sets_speed_only() -> None:
    base = hardware.fingerprint_id(_fp())
    assert base == hardware.fingerprint_id(_fp(numpy="1.0", python="3.12", memory_gib=23.6))
    for change in (
        {"cpu_model": "Intel Xeon"},
        {"isa": "avx512"},
        {"usable_cpus": 4},
        {"memory_gib": 64.0},
        {"torch": "2.4.0"},
        {"blas_info": {"blas": "open"}},
    ):
        assert hardware.fingerprint_id(_fp(**change)) != base, change


def test_label() -> None:
    assert hardware.fingerprint_label(_fp()) == "AMD EPYC 7B13, avx2, 2 cores"
    assert hardware.fingerprint_label(_fp(gpu="H200")).startswith("H200 on AMD EPYC")


def test_fingerprint_of_this_machine_is_complete() -> None:
    fp = hardware.fingerprint(threads=1)
    for key in (
        "cpu_model",
        "flags",
        "isa",
        "logical_cpus",
        "usable_cpus",
        "memory_gib",
        "torch",
        "blas_info",
        "numpy",
        "python",
        "platform",
        "id",
        "label",
    ):
        assert key in fp, key
    assert fp["threads"] == 1
    assert fp["id"] == hardware.fingerprint(threads=2)["id"]  # threads are per run, not machine
    assert len(fp["id"]) == 10


def test_load_share_alone_and_with_a_neighbour() -> None:
    before = {"total": 0, "idle": 0, "steal": 0}
    # 10 s on 2 CPUs at 100 Hz = 2000 jiffies; this process used 10 CPU-seconds = 1000 jiffies.
    alone = {"total": 2000, "idle": 1000, "steal": 0}
    assert hardware.load_share(before, alone, 10.0, 10.0, 2)["others_share"] == 0.0
    # A neighbour kept the other CPU busy.
    busy = {"total": 2000, "idle": 0, "steal": 0}
    assert hardware.load_share(before, busy, 10.0, 10.0, 2)["others_share"] == 0.5
    stolen = {"total": 2000, "idle": 800, "steal": 200}
    assert hardware.load_share(before, stolen, 10.0, 10.0, 2)["steal_share"] == 0.1
    assert hardware.load_share(None, busy, 1.0, 1.0, 2) == {
        "steal_share": None,
        "others_share": None,
    }


def test_warning_names_the_reason_and_threshold() -> None:
    assert hardware.load_warning({"others_share": 0.02, "steal_share": 0.0}) is None
    assert hardware.load_warning({"others_share": None, "steal_share": None}) is None
    warn = hardware.load_warning({"others_share": 0.5, "steal_share": 0.0})
    assert warn is not None and "50%" in warn and "not alone" in warn
    assert "stole" in hardware.load_warning({"others_share": 0.0, "steal_share": 0.2})


def test_load_meter_measures_this_process() -> None:
    meter = hardware.LoadMeter().start()
    total = 0
    for i in range(200_000):
        total += i
    out = meter.stop(steps=4)
    assert out["wall_s"] > 0 and out["process_cpu_s"] >= 0
    assert out["steps"] == 4 and out["wall_per_step_s"] * 4 == pytest.approx(
        out["wall_s"], abs=1e-3
    )
    assert isinstance(out["alone"], bool)
    assert out["alone"] == (out["warning"] is None)
    for key in ("loadavg_start", "loadavg_end", "steal_share", "others_share", "cpu_per_wall"):
        assert key in out


def test_stop_before_start_raises() -> None:
    with pytest.raises(RuntimeError):
        hardware.LoadMeter().stop()


def test_tree_clock_keeps_the_cpu_time_of_a_descendant_that_exited() -> None:
    import subprocess
    import sys
    import time

    from racer_bench.system.hardware import TreeClock

    clock = TreeClock()
    before = clock()
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
    child = subprocess.Popen([sys.executable, "-c", burn + "time.sleep(2)"])
    try:
        deadline = time.monotonic() + 20
        while clock() - before < 0.25 and time.monotonic() < deadline:  # read while it lives
            time.sleep(0.05)
    finally:
        child.wait()
    assert clock() - before >= 0.25  # still counted after the child exited


@pytest.mark.parametrize(
    ("requested", "others", "cpus", "expected"),
    [(2, 1.0, 2, 1), (2, 0.3, 2, 2), (2, 0.6, 2, 1), (2, 2.0, 2, 1), (8, 3.0, 16, 8),
     (16, 4.2, 16, 12), (2, None, 2, 2), (2, 1.0, None, 2)],
)  # fmt: skip
def test_threads_left_gives_up_the_cores_others_keep_busy(requested, others, cpus, expected):
    assert hardware.threads_left(requested, others, cpus) == expected


def test_thread_governor_follows_the_measured_neighbours(monkeypatch) -> None:
    """One busy neighbour on 2 CPUs -> 1 thread; when it stops -> back to the 2 requested."""
    import torch

    monkeypatch.setattr(hardware, "usable_cpus", lambda: 2)
    monkeypatch.setattr(hardware, "_clock_ticks", lambda: 100)
    # (wall s, this process's CPU s, /proc/stat jiffies): 2 CPUs busy while we used 1 CPU-s,
    # then only our own 2 CPU-s in the next second.
    marks = iter([(0.0, 0.0, {"total": 0, "idle": 0, "steal": 0}),
                  (1.0, 1.0, {"total": 200, "idle": 0, "steal": 0}),
                  (2.0, 3.0, {"total": 400, "idle": 0, "steal": 0})])  # fmt: skip
    governor = hardware.ThreadGovernor(2, first_sample_s=0.0)
    monkeypatch.setattr(governor, "_now", lambda: next(marks))
    before = torch.get_num_threads()
    try:
        assert governor.before_prompt() == 1 and torch.get_num_threads() == 1
        assert governor.before_prompt() == 2 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    report = governor.report()
    assert report == {"threads_requested": 2, "threads_per_prompt": {"1": 1, "2": 1}}
    warning = hardware.load_warning({"others_share": 0.25, "steal_share": 0.0, **report})
    assert "fewer threads than the 2 requested" in warning and "1 on 1" in warning


def test_a_prompt_on_fewer_threads_makes_the_run_not_alone_however_small_the_share() -> None:
    report = {"threads_requested": 2, "threads_per_prompt": {"1": 1, "2": 25}}
    warning = hardware.load_warning({"others_share": 0.01, "steal_share": 0.0, **report})
    assert warning is not None and "1 on 1" in warning
    full = {"threads_requested": 2, "threads_per_prompt": {"2": 26}}
    assert hardware.load_warning({"others_share": 0.01, "steal_share": 0.0, **full}) is None


def test_run_load_recomputes_alone_with_the_threads_each_prompt_had() -> None:
    from racer_bench.run.threads import run_load

    class Meter:
        def stop(self, steps: int) -> dict:
            return {"others_share": 0.01, "steal_share": 0.0, "warning": None, "alone": True}

    class Governor:
        def report(self) -> dict:
            return {"threads_requested": 2, "threads_per_prompt": {"1": 1, "2": 3}}

    load = run_load(Meter(), 10, Governor())  # type: ignore[arg-type]
    assert load["alone"] is False and "fewer threads" in load["warning"]
