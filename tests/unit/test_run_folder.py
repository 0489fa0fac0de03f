"""Run-folder writes that survive faults: torn last lines, signals mid-write, one writer."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from racer_bench.errors import ConfigError
from racer_bench.record import folder as records
from racer_bench.run import runlock
from tests.conftest import REPO


def record(i: int, status: str = "ok", size: int = 40) -> dict:
    return {"id": f"p/{i}", "status": status, "text": "é" * size}  # multi-byte characters


def test_loader_never_reads_a_torn_line_and_repair_keeps_it(tmp_path):
    for i in range(3):
        records.append_prompt(tmp_path, record(i))
    full = (tmp_path / records.PROMPTS_FILE).read_bytes()
    second_end = full.index(b"\n", full.index(b"\n") + 1) + 1
    for cut in range(second_end, len(full) + 1):  # every way the third write can be torn
        path = tmp_path / records.PROMPTS_FILE
        path.write_bytes(full[:cut])
        for old in tmp_path.glob("*.torn-*"):
            old.unlink()
        whole = cut == len(full)
        assert [r["id"] for r in records.load_prompts(tmp_path)] == ["p/0", "p/1", "p/2"][
            : 2 + whole
        ]
        copy = records.drop_torn_tail(tmp_path)
        assert (copy is None) == (whole or cut == second_end)
        if copy is not None:
            assert copy.read_bytes() == full[second_end:cut]
        assert path.read_bytes() == (full if whole else full[:second_end])


def test_every_torn_tail_is_kept(tmp_path):
    path = tmp_path / records.PROMPTS_FILE
    for n in (1, 2):
        path.write_bytes(b'{"id": "p/0"}\n{"id": "p/1", "te')
        assert records.drop_torn_tail(tmp_path) == tmp_path / f"{records.PROMPTS_FILE}.torn-{n}"
    assert records.end_of_last_line(path, path.stat().st_size, chunk=3) == path.stat().st_size


def test_a_redone_prompt_replaces_its_failed_line(tmp_path):
    records.append_prompt(tmp_path, record(0))
    records.append_prompt(tmp_path, record(1, "failed"))
    records.append_prompt(tmp_path, record(2))
    records.append_prompt(tmp_path, record(1))  # a resumed run redid it
    assert [(r["id"], r["status"]) for r in records.load_prompts(tmp_path)] == [
        ("p/0", "ok"), ("p/1", "ok"), ("p/2", "ok")
    ]  # fmt: skip
    assert records.finished_ids(tmp_path) == {"p/0", "p/1", "p/2"}


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

    monkeypatch.setattr(records.os, "write", slow_write)
    # Python's own Ctrl-C handler, whatever an earlier test in this worker left (a library
    # that set SIGINT aside would swallow the interrupt this test expects)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            records.append_prompt(tmp_path, record(0, size=1000))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(calls) == 2  # the rest of the line was written before the interrupt
    line = (tmp_path / records.PROMPTS_FILE).read_bytes()
    assert line.endswith(b"\n") and json.loads(line)["id"] == "p/0"


def test_one_writer_per_run_folder(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom racer_bench.run import runlock\n"
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


def test_sigkill_mid_append_tears_at_most_the_last_line(tmp_path):
    """A forked writer appending 16 MiB records is SIGKILLed while a write is under way (seen
    as a file size between two line ends, a random record each trial): what is left is whole
    lines plus at most one torn tail, which the loader skips and the repair keeps."""
    rng = random.Random(0)
    text = "x" * (16 << 20)  # large, so a kill lands inside the write (it did 32 times of 32)
    line_size = len(json.dumps(record_of(0, text)).encode()) + 1
    torn_trials = 0
    for trial in range(3):
        run_dir = tmp_path / str(trial)
        run_dir.mkdir()
        pid = os.fork()
        if pid == 0:  # the writer: no torch, no threads, just appends
            try:
                for i in range(100):
                    records.append_prompt(run_dir, record_of(i, text))
            finally:
                os._exit(0)
        target = rng.randint(1, 2)  # kill while record `target` is being written
        path, deadline = run_dir / records.PROMPTS_FILE, time.monotonic() + 60
        while time.monotonic() < deadline:
            size = path.stat().st_size if path.exists() else 0
            if (size > target * line_size and size % line_size) or size >= (target + 1) * line_size:
                break
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        size = path.stat().st_size
        whole, torn = divmod(size, line_size)
        assert [r["id"] for r in records.load_prompts(run_dir)] == [
            f"p/{i:03d}" for i in range(whole)
        ]
        copy = records.drop_torn_tail(run_dir)
        assert (copy is not None) == bool(torn)
        assert path.stat().st_size == whole * line_size
        torn_trials += bool(torn)
    assert torn_trials >= 1  # the kills did land inside writes
    for run_dir in tmp_path.iterdir():  # large records: do not leave them in /tmp
        for file in run_dir.iterdir():
            file.unlink()


def record_of(i: int, text: str) -> dict:
    return {"id": f"p/{i:03d}", "status": "ok", "text": text}
