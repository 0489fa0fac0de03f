"""Command line: ``python -m racer_bench method=racer task=humaneval`` (Hydra overrides)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from racer_bench.analysis.report import print_summary
from racer_bench.errors import ConfigError

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
GROUPS = ("model", "method", "verifier", "scheduler", "task", "logger", "experiment", "sweep",
          "debug")  # fmt: skip


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


def find_config_error(error: BaseException) -> ConfigError | None:
    """The ConfigError behind ``error`` (Hydra wraps errors raised while instantiating)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, ConfigError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _choices() -> dict[str, Any]:
    try:
        return dict(HydraConfig.get().runtime.choices)
    except ValueError:
        return {}


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> float | None:
    from racer_bench.runner import run

    try:
        run_dir = Path(HydraConfig.get().runtime.output_dir)
        summary = run(cfg, run_dir, _choices())
    except Exception as error:
        config_error = find_config_error(error)
        if config_error is None:
            raise
        print(f"error: {config_error}", file=sys.stderr)
        sys.exit(2)
    print_summary(summary)
    print(f"run folder: {summary['run_dir']}")
    return summary.get("speedup")  # the headline, for Hydra sweepers that optimise


def main() -> None:
    """Console entry point (``racer-bench``)."""
    try:
        check_group_choices(sys.argv[1:])
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    _hydra_main()
