"""W&B logging, offline into a temp dir, checked by reading the offline run file back."""

from __future__ import annotations

import json
import math
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from omegaconf import DictConfig

from racer_bench.analysis import frames, tracking
from racer_bench.errors import ConfigError
from racer_bench.record import folder as run_records
from racer_bench.run.runner import run
from tests.unit.test_frames import write_run

BLOCK, HEADER = 32768, 7  # W&B's transaction log: LevelDB log blocks after a 7-byte file header


def log_chunks(path: Path) -> Iterator[bytes]:
    """Records of a ``run-<id>.wandb`` file (LevelDB log format: FULL/FIRST/MIDDLE/LAST)."""
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, pending = HEADER, b""
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        if length == 0 and kind == 0:  # block padding
            pos += left
            continue
        chunk, pos = data[pos + HEADER : pos + HEADER + length], pos + HEADER + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            yield pending


def item_key(item: Any) -> str:
    return item.key or ".".join(item.nested_key)


def finished_records(path: Path, timeout_s: float = 60.0) -> list[Any]:
    """The run file's records once its ``exit`` record is on disk (W&B writes it after finish)."""
    import wandb
    from wandb.proto import wandb_internal_pb2 as pb

    wandb.teardown()  # stops the W&B service, which flushes and closes the run file
    deadline = time.monotonic() + timeout_s
    while True:
        records = []
        for chunk in log_chunks(path):
            records.append(pb.Record())
            records[-1].ParseFromString(chunk)
        done = any(r.WhichOneof("record_type") == "exit" for r in records)
        if done or time.monotonic() > deadline:
            return records
        time.sleep(0.5)


def read_offline_run(root: Path) -> dict[str, Any]:
    """Run header, config, final summary, history keys and files of the one offline run."""
    (path,) = root.glob("wandb/offline-run-*/run-*.wandb")
    out: dict[str, Any] = {"summary": {}, "history": set(), "files": [], "dir": path.parent}
    for record in finished_records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            out["run"] = record.run
            items = record.run.config.update
            out["config"] = {item_key(i): json.loads(i.value_json) for i in items}
        elif kind == "summary":
            items = record.summary.update
            out["summary"] |= {item_key(i): json.loads(i.value_json) for i in items}
        elif kind == "history":
            out["history"] |= {item_key(i).split(".")[0] for i in record.history.item}
        elif kind == "files":
            out["files"] += [f.path for f in record.files.files]
    return out


@pytest.fixture
def offline_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No API key anywhere and W&B's own folders inside the test's temp dir."""
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home" / name.lower()))
    monkeypatch.setenv("WANDB_SILENT", "true")


def test_namespaced_keys_and_missing_values() -> None:
    summary = {"speedup": 1.5, "speedup_ci95": [1.2, 1.8], "mat": 2.5, "tokens_per_s": 10.0,
               "retrieval_hit_rate": math.nan, "draft_size_mean": 12.0, "divergence": 0.25,
               "accuracy_delta": -0.01, "metric": "pass@1", "pass@1": 0.5,
               "baseline_pass@1": 0.75}  # fmt: skip
    summary["per_category"] = {"qa": {"speedup": 1.1, "mat": 2.0}}
    out = tracking.namespaced(summary)
    assert out["speed/speedup"] == 1.5 and out["accept/mat"] == 2.5
    assert (out["speed/speedup_ci_low"], out["speed/speedup_ci_high"]) == (1.2, 1.8)
    assert out["retrieval/hit_rate"] is None  # NaN is sent as missing, not as a number
    assert out["draft/size_mean"] == 12.0 and out["asd/divergence"] == 0.25
    assert out["score/pass@1"] == 0.5 and out["score/baseline_pass@1"] == 0.75
    assert out["category/qa/speedup"] == 1.1
    assert "speed/baseline_tokens_per_s" not in out


def test_asd_quality_measures_are_logged() -> None:
    summary = {"agreement": 0.5, "agreement_ci95": [0.3, 0.7], "logprob_gap": -0.2,
               "logprob_gap_ci95": [-0.3, -0.1], "first_divergence": 0.4}  # fmt: skip
    out = tracking.namespaced(summary)
    assert out["asd/agreement"] == 0.5 and out["asd/agreement_ci_low"] == 0.3
    assert out["asd/logprob_gap"] == -0.2 and out["asd/logprob_gap_ci_high"] == -0.1
    assert out["asd/first_divergence"] == 0.4


def test_mode_auto_goes_offline_without_a_key(tmp_path: Path) -> None:
    no_netrc = {"NETRC": str(tmp_path / "missing")}
    assert tracking.resolve_mode("auto", no_netrc) == "offline"
    assert tracking.resolve_mode("auto", no_netrc | {"WANDB_API_KEY": "k" * 40}) == "online"
    assert tracking.resolve_mode("auto", no_netrc | {"WANDB_MODE": "disabled"}) == "disabled"
    assert tracking.resolve_mode("offline", {"WANDB_API_KEY": "k" * 40}) == "offline"
    assert tracking.resolve_mode("online", no_netrc) == "offline"  # no key: no login prompt
    assert tracking.resolve_mode("auto", no_netrc | {"WANDB_MODE": "online"}) == "offline"
    netrc = tmp_path / "netrc"
    netrc.write_text("machine api.wandb.ai\n  login user\n  password " + "p" * 40 + "\n")
    assert tracking.resolve_mode("auto", {"NETRC": str(netrc)}) == "online"
    other_host = {"NETRC": str(netrc), "WANDB_BASE_URL": "https://wandb.example.org"}
    assert tracking.resolve_mode("auto", other_host) == "offline"
    with pytest.raises(ConfigError, match=r"logger\.mode"):
        tracking.resolve_mode("sometimes", {})


def test_logger_none_is_the_null_tracker(compose_cfg: Callable[..., DictConfig], tmp_path: Path
                                         ) -> None:  # fmt: skip
    assert isinstance(tracking.start(compose_cfg(), tmp_path, {}), tracking.NullTracker)


@pytest.mark.usefixtures("offline_env")
def test_runner_logs_offline_run(compose_cfg: Callable[..., DictConfig], tmp_path: Path) -> None:
    cfg = compose_cfg("model=tiny_random", "method=pld", "task=tiny", "logger=wandb",
                      "task.limit=2", "max_new_tokens=8", "warmup_prompts=0",
                      "experiment_name=tracking_test", "tags=[unit]")  # fmt: skip
    choices = {"model": "tiny_random", "method": "pld", "task": "tiny", "verifier": "greedy"}
    run_dir = tmp_path / "run"
    summary = run(cfg, run_dir, choices)
    logged = read_offline_run(run_dir)
    header = logged["run"]
    assert (header.project, header.run_group, header.job_type) == ("racer_bench", "tracking_test",
                                                                   "pld")  # fmt: skip
    assert {"unit", "pld", "tiny", "greedy", "tiny_random", "lossless"} <= set(header.tags)
    assert logged["config"]["method"]["_target_"] == "methods.pld.PLDDrafter"
    assert (
        logged["config"]["manifest"]["git_sha"]
        == run_records.read_json(run_dir / "manifest.json")["git_sha"]
    )
    assert logged["summary"]["speed/speedup"] == pytest.approx(summary["speedup"])
    assert logged["summary"]["accept/mat"] == pytest.approx(summary["mat"])
    assert logged["summary"]["score/nonempty"] == pytest.approx(summary["nonempty"])
    assert {"accept/hist", "prompts", "figures/speedup_mat"} <= logged["history"]
    (table,) = (logged["dir"] / "files").glob("media/table/prompts_*.table.json")
    rows = json.loads(table.read_text())
    assert len(rows["data"]) == 2 and "speedup" in rows["columns"]
    assert any(f.startswith("media/images/figures/accept_hist") for f in logged["files"])
    assert (run_dir / "figures" / "speedup_mat.png").exists()


@pytest.mark.usefixtures("offline_env")
def test_lossy_run_logs_asd_metrics(compose_cfg: Callable[..., DictConfig], tmp_path: Path
                                    ) -> None:  # fmt: skip
    run_dir = write_run(tmp_path, "asd", "pld", "gsm8k", ("gsm8k",), 6, verifier="asd",
                        strict=True)  # fmt: skip
    summary = frames.load_run(run_dir).summary | {"metric": "accuracy"}
    cfg = compose_cfg("logger=wandb", "logger.log_figures=false", "logger.name=asd-check")
    tracker = tracking.start(cfg, run_dir, {"method": "pld", "task": "gsm8k", "verifier": "asd"})
    assert isinstance(tracker, tracking.WandbTracker)
    tracker.log_summary(summary, run_dir)
    tracker.finish()
    logged = read_offline_run(run_dir)
    assert logged["run"].display_name == "asd-check"
    assert "lossy" in logged["run"].tags
    for key in ("divergence", "accuracy_delta", "gain_vs_strict"):
        assert logged["summary"][f"asd/{key}"] == pytest.approx(summary[key])
    assert "prompts" in logged["history"] and not any("figures" in k for k in logged["history"])


def test_tracker_errors_never_fail_the_run(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        summary: ClassVar[dict] = {}

        def log(self, data: dict) -> None:
            raise RuntimeError("network down")

        def finish(self, exit_code: int = 0) -> None:
            raise RuntimeError("still down")

    tracker = tracking.WandbTracker(Broken(), log_prompts=False, log_figures=False)
    tracker.log_summary({"speedup": 1.0}, Path("does-not-exist"))
    tracker.finish(failed=True)
    assert "W&B logging failed" in caplog.text and "W&B finish failed" in caplog.text
