"""Run untrusted generated code in a separate, resource-limited subprocess."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

MEMORY_LIMIT_BYTES = 1 << 30  # 1 GiB address space
FILE_SIZE_LIMIT_BYTES = 1 << 24


def _limit_resources(cpu_seconds: int) -> None:
    """Runs in the child before exec: caps CPU time, memory, file size and forks."""
    os.setsid()
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT_BYTES, FILE_SIZE_LIMIT_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (64, 64))


def run_python(program: str, timeout_s: float = 10.0) -> tuple[bool, str]:
    """Execute ``program`` with ``python -I`` in a throwaway directory.

    Returns (passed, message): passed means exit status 0 within ``timeout_s`` seconds.
    The child gets an empty environment, its own session and a temporary working directory;
    it is killed with its process group on timeout.
    """
    with tempfile.TemporaryDirectory(prefix="racer_bench_exec_") as tmp:
        script = Path(tmp) / "program.py"
        script.write_text(program)
        cpu = max(1, int(timeout_s) + 1)
        try:
            proc = subprocess.run(
                [sys.executable, "-I", "-B", str(script)],
                cwd=tmp,
                env={"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"},
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout_s,
                preexec_fn=lambda: _limit_resources(cpu),
                check=False,
            )
        except subprocess.TimeoutExpired:
            return False, f"timeout after {timeout_s}s"
        if proc.returncode == 0:
            return True, ""
        tail = proc.stderr.decode(errors="replace").strip().splitlines()
        return False, tail[-1] if tail else f"exit status {proc.returncode}"
