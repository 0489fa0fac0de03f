"""Run-folder writes that survive faults: torn last lines, signals mid-write, one writer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from racer_bench import runlock
from racer_bench.analysis import records as R
from racer_bench.errors import ConfigError
from tests.conftest import REPO


def record(i: int, status: str = "ok", size: int = 40) -> dict:
    return {"id": f"p/{i}", "status": status, "text": "é" * size}  # multi-byte characters


def test_loader_never_reads_a_torn_line_and_repair_keeps_it(tmp_path):
    for i in range(3):
        R.append_prompt(tmp_path, record(i))
    full = (tmp_path / R.PROMPTS_FILE).read_bytes()
    second_end = full.index(b"\n", full.index(b"\n") + 1) + 1
    for cut in range(second_end, len(full) + 1):  # every way the third write can be torn
        path = tmp_path / R.PROMPTS_FILE
        path.write_bytes(full[:cut])
        for old in tmp_path.glob("*.torn-*"):
            old.unlink()
        whole = cut == len(full)
        assert [r["id"] for r in R.load_prompts(tmp_path)] == ["p/0", "p/1", "p/2"][: 2 + whole]
        copy = R.drop_torn_tail(tmp_path)
        assert (copy is None) == (whole or cut == second_end)
        if copy is not None:
            assert copy.read_bytes() == full[second_end:cut]
        assert path.read_bytes() == (full if whole else full[:second_end])


def test_every_torn_tail_is_kept(tmp_path):
    path = tmp_path / R.PROMPTS_FILE
    for n in (1, 2):
        path.write_bytes(b'{"id": "p/0"}\n{"id": "p/1", "te')
        assert R.drop_torn_tail(tmp_path) == tmp_path / f"{R.PROMPTS_FILE}.torn-{n}"
    assert R.end_of_last_line(path, path.stat().st_size, chunk=3) == path.stat().st_size


def test_a_redone_prompt_replaces_its_failed_line(tmp_path):
    R.append_prompt(tmp_path, record(0))
    R.append_prompt(tmp_path, record(1, "failed"))
    R.append_prompt(tmp_path, record(2))
    R.append_prompt(tmp_path, record(1))  # a resumed run redid it
    assert [(r["id"], r["status"]) for r in R.load_prompts(tmp_path)] == [
        ("p/0", "ok"), ("p/1", "ok"), ("p/2", "ok")
    ]  # fmt: skip
    assert R.finished_ids(tmp_path) == {"p/0", "p/1", "p/2"}


def test_ctrl_c_during_an_append_lands_after_the_line(tmp_path, monkeypatch):
    """A SIGINT that arrives while the line is half written is delivered once it is whole."""
    real_write = os.write
    calls = []

    def slow_write(fd: int, data) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            signal.raise_signal(signal.SIGINT)  # Ctrl-C in the middle of the record
            return real_write(fd, data[: len(data) // 2])
        return real_write(fd, data)

    monkeypatch.setattr(R.os, "write", slow_write)
    with pytest.raises(KeyboardInterrupt):
        R.append_prompt(tmp_path, record(0, size=1000))
    assert len(calls) == 2  # the rest of the line was written before the interrupt
    line = (tmp_path / R.PROMPTS_FILE).read_bytes()
    assert line.endswith(b"\n") and json.loads(line)["id"] == "p/0"


def test_one_writer_per_run_folder(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom racer_bench import runlock\n"
         "with runlock.hold(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(120)",
         str(tmp_path)],
        cwd=REPO, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError) as error:
            runlock.check_free(tmp_path)
        message = str(error.value)
        assert f"run folder {tmp_path} is in use by process {holder.pid}" in message
        assert "\n" not in message
        with (
            pytest.raises(ConfigError, match=f"in use by process {holder.pid}"),
            runlock.hold(tmp_path),
        ):
            pass
    finally:
        holder.kill()  # SIGKILL: its lock file stays behind with a dead pid ...
        holder.wait()
    assert (tmp_path / runlock.LOCK_FILE).read_text().strip() == str(holder.pid)
    runlock.check_free(tmp_path)
    with runlock.hold(tmp_path):  # ... and is taken over
        assert (tmp_path / runlock.LOCK_FILE).read_text().strip() == str(os.getpid())
    assert not (tmp_path / runlock.LOCK_FILE).exists()
