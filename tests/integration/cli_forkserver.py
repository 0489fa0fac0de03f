"""Start CLI runs as forked children of one process that imported everything once.

Each ``python -m racer_bench`` spends seconds importing torch and transformers; the fault tests
start many runs, so they fork them from this server instead. The children are real processes
running :func:`racer_bench.cli.main` with their own argv, signal handlers and exit status, and
they receive real signals (PyTorch's DataLoader forks after importing torch the same way).

Protocol, one JSON line each way on stdin / stdout:
``["run", argv, stderr_path]`` -> the child's pid; ``["wait", pid]`` -> its exit status
(the exit code, or minus the signal that killed it).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback

# Imported once here, so that the children start at once. No torch op runs before a fork: a
# thread pool started by one would not survive into the children.
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: F401

import methods.pld  # noqa: F401
import racer_bench.cli
import racer_bench.run.runner
import tests.integration.slow_task  # noqa: F401


def child(argv: list[str], stderr_path: str) -> None:
    """Run the CLI with ``argv``, stderr to ``stderr_path``; never returns."""
    err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(err, 2)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # keep the protocol pipe clean
    sys.argv = ["racer_bench", *argv]
    code = 1
    try:
        racer_bench.cli.main()
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def default_signals() -> None:
    """Give the runs the dispositions of a foreground process, whatever this one inherited.

    A non-interactive shell starts a background job (``pytest ... &``) with SIGINT and SIGQUIT
    ignored, Python then keeps SIGINT ignored, and a forked run would finish instead of stopping
    on Ctrl-C.
    """
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in (signal.SIGTERM, signal.SIGQUIT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def main() -> None:
    default_signals()
    print(json.dumps("ready"), flush=True)
    for line in sys.stdin:
        command, *args = json.loads(line)
        if command == "run":
            pid = os.fork()
            if pid == 0:
                child(*args)
            reply = pid
        else:
            _, status = os.waitpid(args[0], 0)
            reply = os.waitstatus_to_exitcode(status)
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
