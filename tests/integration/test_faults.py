"""Real signals on real CLI runs of the tiny model, each followed by a bare ``resume=R``.

One run folder goes through Ctrl-C, SIGTERM and SIGKILLs at random moments (seeded), then a
resume that finishes it. Checked at every step: the one-line report and exit status, the
INCOMPLETE marker, that no finished prompt is lost or changed, and at the end that every prompt
appears exactly once and every torn line was kept beside the file.
"""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO

N_PROMPTS = 24  # the tiny task's 6 prompts, 4 times over
RUN = ["model=tiny_random", "task=tiny", "task._target_=tests.integration.slow_task.SlowTinyTask",
       "+task.delay_s=0.05", "+task.copies=4", "max_new_tokens=8", "warmup_prompts=0",
       "method=pld"]  # fmt: skip
STOPPED = re.compile(r"stopped after (\d+) of 24 prompts; continue with resume=(\S+)")


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "racer_bench", *args], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def finish(proc: subprocess.Popen[str], timeout: float = 300) -> tuple[int, str]:
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


def complete_lines(run_dir: Path) -> tuple[list[bytes], bytes]:
    """The complete lines of prompts.jsonl and the torn bytes after them."""
    path = run_dir / "prompts.jsonl"
    data = path.read_bytes() if path.exists() else b""
    end = data.rfind(b"\n") + 1
    return data[:end].splitlines(), data[end:]


def wait_for_lines(proc: subprocess.Popen[str], run_dir: Path, n: int) -> None:
    deadline = time.monotonic() + 300
    while len(complete_lines(run_dir)[0]) < n:
        assert proc.poll() is None, f"exited early: {proc.communicate()[1][-2000:]}"
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


def test_ctrl_c_sigterm_and_sigkill_then_resume_keeps_every_prompt_once(tmp_path):
    run_dir = tmp_path / "run"
    # Ctrl-C: found by hand, it printed a KeyboardInterrupt traceback
    proc = start(*RUN, f"hydra.run.dir={run_dir}")
    wait_for_lines(proc, run_dir, 2)
    proc.send_signal(signal.SIGINT)
    done = assert_stopped(*finish(proc), 130, run_dir)
    hydra_record = (run_dir / ".hydra" / "overrides.yaml").read_text()
    seen = complete_lines(run_dir)[0]

    proc = start(f"resume={run_dir}")  # bare resume: the run's own configuration
    wait_for_lines(proc, run_dir, done + 2)
    proc.send_signal(signal.SIGTERM)
    assert assert_stopped(*finish(proc), 143, run_dir) >= done + 2

    rng = random.Random(1)
    torn_tails = []
    for _ in range(3):
        before = complete_lines(run_dir)[0]
        proc = start(f"resume={run_dir}")
        wait_for_lines(proc, run_dir, len(before) + 1)
        time.sleep(rng.uniform(0.0, 0.6))  # a random moment: mid-prompt or mid-write
        proc.kill()
        proc.wait()
        after, torn = complete_lines(run_dir)
        assert after[: len(before)] == before  # finished prompts survive, unchanged
        torn_tails.append(torn)
        seen = after

    status, err = finish(start(f"resume={run_dir}"))
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

    status, err = finish(start(f"resume={run_dir}", "method=racer", "max_new_tokens=9"))
    assert status == 2 and err.strip().splitlines() == [
        f"error: resume={run_dir}: cannot change method, max_new_tokens of a saved run "
        "(a run folder never mixes configurations); start a new run to change them"
    ]
