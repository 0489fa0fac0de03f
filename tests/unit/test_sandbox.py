"""The HumanEval sandbox contains what generated programs get wrong; the user's files stay put.

"The user's files" are files in ``tmp_path``, outside the program's own temporary folder. The
harmful programs are written so that they would stay harmless if a guard failed: the fork bomb
stops at 2**6 processes, and the 10 GB allocation only runs after a 2 GB one was refused.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from racer_bench.tasks.sandbox import run_python


@pytest.fixture
def user_files(tmp_path: Path) -> Path:
    folder = tmp_path / "user"
    (folder / "data").mkdir(parents=True)
    (folder / "notes.txt").write_text("precious")
    (folder / "data" / "table.csv").write_text("1,2\n")
    return folder


def snapshot(folder: Path) -> dict[str, str | None]:
    return {p.relative_to(folder).as_posix(): p.read_text() if p.is_file() else None
            for p in sorted(folder.rglob("*"))}  # fmt: skip


def test_plain_programs_pass_in_their_own_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_python("assert 1 + 1 == 2") == (True, "")
    assert run_python("import math, collections, itertools, re; assert math.gcd(4, 6) == 2")[0]
    scratch = "open('probe.txt', 'w').write('x'); assert open('probe.txt').read() == 'x'"
    assert run_python(scratch) == (True, "")  # writing inside its own folder is fine
    assert list(tmp_path.iterdir()) == []  # ... which is not the caller's folder
    assert run_python("import os; assert 'HOME' not in os.environ")[0]  # empty environment
    assert run_python("assert 1 == 2")[0] is False


WRITES_AND_DELETES = {
    "write": "open(NOTES, 'w').write('gone')",
    "append": "open(NOTES, 'a').write('more')",
    "pathlib write": "import pathlib; pathlib.Path(NOTES).write_text('gone')",
    "os.open truncate": "import os; os.open(NOTES, os.O_WRONLY | os.O_TRUNC)",
    "relative escape": "open('../' * 40 + NOTES.lstrip('/'), 'w').write('gone')",
    "remove": "import os; os.remove(NOTES)",
    "posix unlink": "import posix; posix.unlink(NOTES)",
    "pathlib unlink": "import pathlib; pathlib.Path(NOTES).unlink()",
    "rmtree": "import shutil; shutil.rmtree(FOLDER)",
    "rename over": "import posix; posix.rename(NOTES, FOLDER + '/data/table.csv')",
    "truncate": "import posix; posix.truncate(NOTES, 0)",
    "chmod": "import posix; posix.chmod(NOTES, 0)",
    "symlink then write": "import posix; posix.symlink(NOTES, 'l'); open('l', 'w').write('x')",
    "hard link then write": "import posix; posix.link(NOTES, 'h'); open('h', 'w').write('x')",
    "rm through a shell": "import os; os.system('rm -rf ' + FOLDER)",
    "rm through subprocess": "import subprocess; subprocess.run(['rm', '-rf', FOLDER])",
    "exec rm": "import os; os.execv('/bin/rm', ['rm', '-rf', FOLDER])",
    "spawn rm": "import os; os.posix_spawn('/bin/rm', ['rm', '-rf', FOLDER], {})",
    "ctypes unlink": "import ctypes; ctypes.CDLL(None).unlink(NOTES.encode())",
}


@pytest.mark.parametrize("program", WRITES_AND_DELETES.values(), ids=WRITES_AND_DELETES.keys())
def test_writes_and_deletions_outside_the_folder_are_refused(program, user_files):
    before = snapshot(user_files)
    prologue = f"NOTES = {str(user_files / 'notes.txt')!r}\nFOLDER = {str(user_files)!r}\n"
    passed, message = run_python(prologue + program)
    assert not passed and message
    assert snapshot(user_files) == before


FORK_BOMBS = {  # each would stop at 2**6 = 64 processes if forking were allowed
    "os.fork": "import os\nfor _ in range(6):\n    os.fork()",
    "posix.fork": "import posix\nfor _ in range(6):\n    posix.fork()",
    "multiprocessing": "import multiprocessing as mp\nfor _ in range(6):\n"
    "    mp.Process(target=print).start()",
    "subprocess": "import subprocess, sys\nfor _ in range(6):\n    subprocess.Popen(['true'])",
}


@pytest.mark.parametrize("program", FORK_BOMBS.values(), ids=FORK_BOMBS.keys())
def test_fork_bombs_cannot_fork(program):
    passed, message = run_python(program)
    assert not passed
    assert "not allowed" in message or "'NoneType' object is not callable" in message, message


def test_memory_is_capped():
    assert run_python("x = bytearray(2 * 2**30)") == (False, "MemoryError")
    assert run_python("x = bytearray(10 * 2**30)") == (False, "MemoryError")
    assert run_python("x = [0] * (10 * 2**30 // 8)") == (False, "MemoryError")


def test_endless_programs_are_stopped():
    start = time.monotonic()
    assert run_python("import time\ntime.sleep(10**6)", timeout_s=1) == (False, "timeout after 1s")
    assert run_python("while True: pass", timeout_s=1)[0] is False
    assert time.monotonic() - start < 30
