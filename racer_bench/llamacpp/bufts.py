"""llama.cpp's extra buffer types, checked in a child process before a run's model uses them.

By default llama.cpp puts the weights its CPU backend can repack (AMX, ``CPU_REPACK``) into
"extra buffer types"; on an AMX Xeon that default crashed in decode (a segfault). So before a
run loads a GGUF with them, :func:`verdict` has a child process (:mod:`.probe`) load the same
GGUF and decode a few tokens. A crash (killed by a signal), a failure (non-zero exit or no
``ok`` line) or a hang (past ``timeout_s``) turns them off for the run
(``use_extra_bufts=False`` in llama.cpp's model parameters, which llama-cpp-python 0.3's
``Llama`` does not expose: :func:`model_params` sets it while the model loads). The verdict,
why, and which buffers the child's model used go into the manifest; it is cached per machine
(CPU model and flags), GGUF (name and size) and llama-cpp-python version (a hang is not cached:
a busy machine can slow the child past its limit once), in ``<cache_dir>/llamacpp/``.
"""

from __future__ import annotations

import hashlib
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from racer_bench.record import folder as records

PROBE_TOKENS = 4
BUFFER_LINE = re.compile(r"(\S+) model buffer size")


def child_command(gguf: Path, threads: int) -> list[str]:
    """The probe's command line (:mod:`.probe`)."""
    return [sys.executable, "-m", "racer_bench.llamacpp.probe", str(gguf), str(threads),
            str(PROBE_TOKENS)]  # fmt: skip


def run_child(command: Sequence[str], timeout_s: float) -> dict[str, Any]:
    """Run the probe; its verdict: ``ok``, ``crash``, ``failed`` or ``hang``, with why."""
    start = time.perf_counter()
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"verdict": "hang", "why": f"no answer within {timeout_s:g} s",
                "seconds": round(time.perf_counter() - start, 2)}  # fmt: skip
    out = {"seconds": round(time.perf_counter() - start, 2), "returncode": done.returncode,
           "buffers": sorted(set(BUFFER_LINE.findall(done.stderr)))}  # fmt: skip
    return out | judge(done.returncode, done.stdout, done.stderr)


def judge(returncode: int, stdout: str, stderr: str) -> dict[str, str]:
    """The verdict of a finished child from its exit status and output."""
    if returncode < 0:
        name = signal.Signals(-returncode).name if -returncode in signal.valid_signals() else ""
        return {"verdict": "crash", "why": f"killed by signal {-returncode} {name}".strip()}
    if returncode != 0:
        last = (stderr.strip().splitlines() or ["no output"])[-1][:200]
        return {"verdict": "failed", "why": f"exit status {returncode}: {last}"}
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    try:
        ok = bool(lines) and bool(json.loads(lines[-1]).get("ok"))
    except json.JSONDecodeError:
        ok = False
    if not ok:
        return {"verdict": "failed", "why": "exit status 0 without the probe's ok line"}
    return {"verdict": "ok", "why": f"loaded and decoded {PROBE_TOKENS} tokens in a child"}


def cpu_identity() -> str:
    """The CPU model and flags (what decides which buffer types llama.cpp picks)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        import platform

        return platform.processor() or platform.machine()
    keep = [ln for ln in text.splitlines() if ln.startswith(("model name", "flags"))]
    return "\n".join(dict.fromkeys(keep))


def cache_key(gguf: Path, llama_version: str) -> str:
    """Machine, GGUF and llama-cpp-python version, hashed."""
    size = gguf.stat().st_size if gguf.exists() else -1
    blob = json.dumps([cpu_identity(), gguf.name, size, llama_version])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def cache_file(cache_dir: str | Path) -> Path:
    """Where the verdicts are kept."""
    return Path(cache_dir).expanduser() / "llamacpp" / "extra_bufts.json"


def verdict(gguf: Path, threads: int, setting: str, cache_dir: str | Path, llama_version: str,
            timeout_s: float = 120.0,
            command: Sequence[str] | None = None) -> dict[str, Any]:  # fmt: skip
    """Whether the run's model may use the extra buffer types, and why (``use_extra_bufts``).

    ``setting``: ``on`` / ``off`` are taken as asked (no probe); ``auto`` probes once per cache
    key. ``command`` replaces the probe's command line (tests use fakes).
    """
    if setting in ("on", "off"):
        return {"use_extra_bufts": setting == "on", "verdict": "not probed",
                "why": f"extra_bufts={setting} was asked for"}  # fmt: skip
    path, key = cache_file(cache_dir), cache_key(gguf, llama_version)
    cached = records.read_json(path) if path.exists() else {}
    if key in cached:
        return cached[key] | {"cached": True}
    found = run_child(command or child_command(gguf, threads), timeout_s)
    found["use_extra_bufts"] = found["verdict"] == "ok"
    found["probed"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    if found["verdict"] != "hang":  # a loaded machine can slow a child past its limit once
        path.parent.mkdir(parents=True, exist_ok=True)
        records.write_json(path, cached | {key: found})
    return found | {"cached": False}


@contextmanager
def model_params(use_extra_bufts: bool) -> Iterator[None]:
    """While a ``Llama`` loads: its model parameters with ``use_extra_bufts`` as given."""
    import llama_cpp.llama_cpp as lib

    default = lib.llama_model_default_params

    def params() -> Any:
        out = default()
        out.use_extra_bufts = use_extra_bufts
        return out

    lib.llama_model_default_params = params
    try:
        yield
    finally:
        lib.llama_model_default_params = default
