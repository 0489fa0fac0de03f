"""Command line: ``python -m racer_bench method=racer task=humaneval`` (Hydra overrides).

Exit status: 0 done, 2 bad input (one line naming the key), 130 / 143 stopped by Ctrl-C /
SIGTERM (one line saying how to continue).
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from racer_bench.analysis.report import print_batch_summary, print_serve_summary, print_summary
from racer_bench.config.paths import CONF_DIR
from racer_bench.errors import ConfigError, RunStopped, find_config_error
from racer_bench.llamacpp import reference as llamacpp_reference
from racer_bench.llamacpp.compat import check_run as check_llamacpp
from racer_bench.llamacpp.offline import run as run_llamacpp
from racer_bench.record import folder as records
from racer_bench.run import resolvers, runlock
from racer_bench.run.runner import run
from racer_bench.vllm_backend.offline import run as run_vllm
from racer_bench.vllm_backend.serving import run as run_serving

resolvers.register()  # conf/ is composed here (and in launcher jobs that import this module)
llamacpp_reference.register()  # reference=llamacpp for the native runner

GROUPS = ("backend", "model", "method", "verifier", "scheduler", "task", "logger", "experiment",
          "sweep", "debug")  # fmt: skip


def check_group_choices(argv: list[str], conf_dir: Path = CONF_DIR) -> None:
    """Reject ``group=name`` overrides that name no YAML file, listing the valid names."""
    for arg in argv:
        key, sep, value = arg.lstrip("+~").partition("=")
        key = key.removeprefix("override ").strip()
        if not sep or key not in GROUPS or not value or value == "null":
            continue
        valid = sorted(p.stem for p in (conf_dir / key).glob("*.yaml"))
        for name in value.split(","):
            if name.startswith(("glob(", "choice(", "range(")):
                continue
            if name not in valid:
                raise ConfigError(f"{key}={name}: unknown {key}; choose one of: {', '.join(valid)}")


def plain_overrides(argv: list[str]) -> dict[str, str]:
    """``key -> value`` of the ``key=value`` arguments (``+``/``++`` prefixes dropped)."""
    pairs = (arg.lstrip("+").partition("=") for arg in argv if not arg.startswith("-"))
    return {key: value for key, sep, value in pairs if sep}


def preflight(argv: list[str]) -> list[str]:
    """Checks that must run before Hydra writes into a run folder; returns the argv to use.

    A run folder held by a live process, or (without ``resume=``) one that already holds a
    run, is refused. ``resume=R`` continues R itself: Hydra is pointed at R and told not to
    write its ``.hydra/`` there, which keeps R's record of how the run was started.
    """
    check_group_choices(argv)
    values = plain_overrides(argv)
    run_dir, resume = values.get("hydra.run.dir"), values.get("resume")
    if resume in (None, "null", ""):
        if run_dir:
            runlock.check_free(Path(run_dir))
        if run_dir and (Path(run_dir) / records.MANIFEST_FILE).exists():
            raise ConfigError(f"hydra.run.dir={run_dir} already holds a run; continue it with "
                              f"resume={run_dir} or write to another folder")  # fmt: skip
        return argv
    if not (Path(resume) / records.MANIFEST_FILE).exists():
        raise ConfigError(f"resume={resume}: not a run folder (no {records.MANIFEST_FILE})")
    runlock.check_free(Path(resume))
    extra = ["hydra.output_subdir=null"] + ([] if run_dir else [f"hydra.run.dir={resume}"])
    return [*saved_choices(Path(resume), values), *argv, *extra]


def saved_choices(run_dir: Path, given: dict[str, str]) -> list[str]:
    """``group=option`` for the run's own options of the groups the command line leaves alone,
    so that its keys compose (``resume=R method.capacity=3`` on a RACER run reaches the
    resume check instead of failing on the default method, which has no capacity). Groups
    with a global package (experiment, sweep, debug, local) would re-apply whole settings
    (even a multirun), so they are left out."""
    choices = records.read_json(run_dir / records.MANIFEST_FILE).get("choices") or {}
    skip = {"experiment", "sweep", "debug", "local", "paths"}
    return [f"{group}={option}" for group, option in choices.items()
            if option and group not in skip and not group.startswith("hydra")
            and group not in given and (CONF_DIR / group).is_dir()]  # fmt: skip


def _choices() -> dict[str, Any]:
    try:
        return dict(HydraConfig.get().runtime.choices)
    except ValueError:
        return {}


def _fail(message: object, status: int) -> None:
    print(f"error: {message}" if status == 2 else str(message), file=sys.stderr)
    sys.exit(status)


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> float | None:
    hydra_cfg = HydraConfig.get()
    try:
        summary = _run(cfg, Path(hydra_cfg.runtime.output_dir), list(hydra_cfg.overrides.task))
    except RunStopped as stop:
        _fail(stop, stop.exit_status)
    except Exception as error:
        config_error = find_config_error(error)
        if config_error is None:
            raise
        _fail(config_error, 2)
    if summary.get("mode") == "serve":
        print_serve_summary(summary)
    elif summary.get("backend") == "vllm":
        print_batch_summary(summary)
    else:
        print_summary(summary)
    print(f"run folder: {summary['run_dir']}")
    return summary.get("speedup")  # the headline, for Hydra sweepers that optimise


def _run(cfg: DictConfig, run_dir: Path, overrides: list[str]) -> dict[str, Any]:
    """The run on the configured backend (vLLM and llama.cpp are imported only when asked
    for; what a run asks of llama.cpp is checked first, before any model loads)."""
    backend = cfg.get("backend", {})
    check_llamacpp(cfg)
    if backend.get("name") == "llamacpp":
        return run_llamacpp(cfg, run_dir, _choices())
    if backend.get("name") == "vllm":
        serve = backend.get("mode") == "serve"
        return (run_serving if serve else run_vllm)(cfg, run_dir, _choices())
    return run(cfg, run_dir, _choices(), overrides=overrides)


def main() -> None:
    """Console entry point (``racer-bench``)."""
    try:
        sys.argv[1:] = preflight(sys.argv[1:])
        _hydra_main()
    except ConfigError as error:
        _fail(error, 2)
    except KeyboardInterrupt as stop:  # before the run started (Hydra composing, imports)
        _fail("stopped before the run started", 128 + getattr(stop, "signum", signal.SIGINT))
