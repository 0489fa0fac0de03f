"""Real signals on real CLI runs of the tiny model, each followed by a bare ``resume=R``.

The runs are forked from one server process that imported the CLI once
(:mod:`tests.integration.cli_forkserver`), so each starts at once instead of after seconds of
imports.

One run folder goes through Ctrl-C, SIGTERM and SIGKILLs at random moments (seeded), then a
resume that finishes it. Checked at every step: the one-line report and exit status, the
INCOMPLETE marker, that no finished prompt is lost or changed, and at the end that every prompt
appears exactly once and every torn line was kept beside the file.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

N_PROMPTS = 30  # the tiny task's 6 prompts, 5 times over (seconds of work: a busy machine
# must not finish the run before the test has seen its first lines and signalled it)


def run_args(copies: int = 5, delay_s: float = 0.15) -> list[str]:
    """A tiny-model run of ``6 * copies`` prompts, each turn rendered ``delay_s`` late."""
    task = "task._target_=tests.integration.slow_task.SlowTinyTask"
    return [
        "model=tiny_random",
        "task=tiny",
        task,
        f"+task.delay_s={delay_s}",
        f"+task.copies={copies}",
        "max_new_tokens=8",
        "warmup_prompts=0",
        "method=pld",
        "num_threads=1",
    ]  # fmt: skip  (2 threads crawl on a busy machine)


RUN = run_args()
STOPPED = re.compile(rf"stopped after (\d+) of {N_PROMPTS} prompts; continue with resume=(\S+)")


class Runs:
    """CLI runs forked from :mod:`tests.integration.cli_forkserver` (one import for all)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.count = tmp, 0
        # Started as a non-interactive shell starts a background job (SIGINT and SIGQUIT
        # ignored), so the runs must not depend on the dispositions the tests were started with.
        server = f"trap '' INT QUIT; exec {sys.executable} -m tests.integration.cli_forkserver"
        self.server = subprocess.Popen(
            ["sh", "-c", server], cwd=REPO,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.ask() == "ready"

    def ask(self, *command: object) -> object:
        if command:
            self.server.stdin.write(json.dumps(command) + "\n")
            self.server.stdin.flush()
        return json.loads(self.server.stdout.readline())

    def start(self, *argv: str) -> FaultRun:
        self.count += 1
        err = self.tmp / f"stderr-{self.count}.txt"
        return FaultRun(self, int(self.ask("run", list(argv), str(err))), err)

    def close(self) -> None:
        self.server.stdin.close()
        self.server.wait(timeout=60)


class FaultRun:
    def __init__(self, runs: Runs, pid: int, err: Path) -> None:
        self.runs, self.pid, self.err = runs, pid, err

    def running(self) -> bool:
        state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"

    def signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def finish(self) -> tuple[int, str]:
        return int(self.runs.ask("wait", self.pid)), self.err.read_text()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    server = Runs(tmp_path_factory.mktemp("stderr"))
    yield server
    server.close()


def complete_lines(run_dir: Path) -> tuple[list[bytes], bytes]:
    """The complete lines of prompts.jsonl and the torn bytes after them."""
    path = run_dir / "prompts.jsonl"
    data = path.read_bytes() if path.exists() else b""
    end = data.rfind(b"\n") + 1
    return data[:end].splitlines(), data[end:]


def wait_for_lines(run: FaultRun, run_dir: Path, n: int) -> None:
    deadline = time.monotonic() + 300
    while len(complete_lines(run_dir)[0]) < n:
        assert run.running(), f"exited early: {run.err.read_text()[-2000:]}"
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.02)


def assert_stopped(status: int, err: str, expected: int, run_dir: Path) -> int:
    """One line, the right status, INCOMPLETE left, no half line; returns prompts done."""
    assert status == expected, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    last = re.split(r"[\r\n]+", err.strip())[-1]
    match = STOPPED.fullmatch(last)
    assert match and match.group(2) == str(run_dir), last
    assert err.count("stopped after") == 1
    lines, torn = complete_lines(run_dir)
    assert torn == b"" and int(match.group(1)) == len(lines)
    assert (run_dir / "INCOMPLETE").exists()
    return len(lines)


def test_ctrl_c_sigterm_and_sigkill_then_resume_keeps_every_prompt_once(runs, tmp_path):
    run_dir = tmp_path / "run"
    # Ctrl-C: found by hand, it printed a KeyboardInterrupt traceback
    run = runs.start(*RUN, f"hydra.run.dir={run_dir}")
    wait_for_lines(run, run_dir, 2)
    run.signal(signal.SIGINT)
    done = assert_stopped(*run.finish(), 130, run_dir)
    hydra_record = (run_dir / ".hydra" / "overrides.yaml").read_text()

    run = runs.start(f"resume={run_dir}")  # bare resume: the run's own configuration
    wait_for_lines(run, run_dir, done + 1)
    run.signal(signal.SIGTERM)
    assert assert_stopped(*run.finish(), 143, run_dir) >= done + 1

    rng = random.Random(1)
    torn_tails = []
    for _ in range(3):
        before = complete_lines(run_dir)[0]
        run = runs.start(f"resume={run_dir}")
        wait_for_lines(run, run_dir, len(before) + 1)
        time.sleep(rng.uniform(0.0, 0.5))  # a random moment: mid-prompt or mid-write
        run.signal(signal.SIGKILL)
        assert run.finish()[0] == -signal.SIGKILL
        after, torn = complete_lines(run_dir)
        assert after[: len(before)] == before  # finished prompts survive, unchanged
        torn_tails.append(torn)
    seen = complete_lines(run_dir)[0]

    status, err = runs.start(f"resume={run_dir}").finish()
    assert status == 0, err[-2000:]
    lines, torn = complete_lines(run_dir)
    assert torn == b"" and lines[: len(seen)] == seen
    ids = [json.loads(line)["id"] for line in lines]
    assert len(ids) == len(set(ids)) == N_PROMPTS  # every prompt exactly once
    kept = sorted(run_dir.glob("prompts.jsonl.torn-*"))
    assert [p.read_bytes() for p in kept] == [t for t in torn_tails if t]
    assert not (run_dir / "INCOMPLETE").exists() and not (run_dir / ".lock").exists()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["method"] == "pld" and len(manifest["resumes"]) == 5
    assert json.loads((run_dir / "summary.json").read_text())["n_prompts"] == N_PROMPTS
    assert (run_dir / ".hydra" / "overrides.yaml").read_text() == hydra_record

    for argv, keys in ((["method=racer", "max_new_tokens=9"], "method, max_new_tokens"),
                       (["method.num_pred_tokens=3"], "method.num_pred_tokens")):  # fmt: skip
        status, err = runs.start(f"resume={run_dir}", *argv).finish()
        assert status == 2 and err.strip().splitlines() == [
            f"error: resume={run_dir}: cannot change {keys} of a saved run "
            "(a run folder never mixes configurations); start a new run to change them"
        ]
    assert json.loads((run_dir / "summary.json").read_text())["n_prompts"] == N_PROMPTS


def test_a_second_process_on_a_held_run_folder_is_refused(runs, tmp_path):
    run_dir, slow = tmp_path / "run", run_args(copies=1, delay_s=0.2)
    run = runs.start(*slow, f"hydra.run.dir={run_dir}")
    wait_for_lines(run, run_dir, 1)
    for argv in ([f"resume={run_dir}"], [*slow, f"hydra.run.dir={run_dir}"]):
        status, err = runs.start(*argv).finish()
        assert status == 2 and err.strip().splitlines() == [
            f"error: run folder {run_dir} is in use by process {run.pid} "
            f"(lock {run_dir}/.lock); wait for it to finish or stop it"
        ]
    run.signal(signal.SIGKILL)
    run.finish()
    assert (run_dir / ".lock").read_text().strip() == str(run.pid)  # left by the dead run
    status, err = runs.start(f"resume={run_dir}").finish()  # ... and taken over
    assert status == 0, err[-2000:]
    assert len(complete_lines(run_dir)[0]) == 6 and not (run_dir / ".lock").exists()
