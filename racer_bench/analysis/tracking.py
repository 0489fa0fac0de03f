"""Experiment-tracker adapter (W&B). The run folder stays the source of truth.

``logger=none`` gives :class:`NullTracker`. ``logger=wandb`` gives :class:`WandbTracker`,
which at the end of a run logs: the resolved config and the manifest; the summary metrics under
namespaced keys (:data:`SUMMARY_KEYS`, e.g. ``speed/speedup``, ``accept/mat``); the
accepted-length histogram (``accept/hist``); the per-prompt metrics as a table (``prompts``);
and the run's figures (``figures/<name>``, also written to ``<run folder>/figures/``). All of it
is drawn from the run folder through :mod:`racer_bench.analysis.frames`, never read back from W&B.

``mode: auto`` logs online when an API key is configured (``WANDB_API_KEY`` or a ``wandb
login`` entry in ``~/.netrc``) and offline otherwise, so a run never stops to ask for a login;
``wandb sync <run folder>/wandb/offline-run-*`` uploads an offline run later. A tracker failure
is logged as a warning and never fails the run.
"""

from __future__ import annotations

import logging
import math
import netrc
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from omegaconf import DictConfig, OmegaConf

from racer_bench.config.logger import MODES
from racer_bench.errors import ConfigError
from racer_bench.record import folder as records

log = logging.getLogger(__name__)
DEFAULT_HOST = "https://api.wandb.ai"
SUMMARY_KEYS = {
    "speedup": "speed/speedup",
    "speedup_mean_per_prompt": "speed/speedup_mean_per_prompt",
    "tokens_per_s": "speed/tokens_per_s",
    "baseline_tokens_per_s": "speed/baseline_tokens_per_s",
    "draft_time_share": "speed/draft_time_share",
    "mat": "accept/mat",
    "draft_efficiency": "accept/draft_efficiency",
    "identical": "accept/identical",
    "draft_size_mean": "draft/size_mean",
    "draft_depth_mean": "draft/depth_mean",
    "retrieval_hit_rate": "retrieval/hit_rate",
    "retrieval_accept_share": "retrieval/accept_share",
    "gain_vs_strict": "asd/gain_vs_strict",
    "accuracy_delta": "asd/accuracy_delta",
    "divergence": "asd/divergence",
    "strict_mat": "asd/strict_mat",
    "strict_tokens_per_s": "asd/strict_tokens_per_s",
    "exceptions_per_prompt": "asd/exceptions_per_prompt",
    "regret_per_prompt": "asd/regret_per_prompt",
    "agreement": "asd/agreement",
    "logprob_gap": "asd/logprob_gap",
    "first_divergence": "asd/first_divergence",
    "n_prompts": "run/n_prompts",
    "n_failed": "run/n_failed",
    "new_tokens": "run/new_tokens",
}
CI_KEYS = {"speedup_ci95": "speed/speedup", "accuracy_delta_ci95": "asd/accuracy_delta",
           "agreement_ci95": "asd/agreement", "logprob_gap_ci95": "asd/logprob_gap",
           "first_divergence_ci95": "asd/first_divergence"}  # fmt: skip


class Tracker(Protocol):
    """What the runner calls; implementations must never block or lose the run folder."""

    def log_summary(self, summary: dict[str, Any], run_dir: Path) -> None: ...

    def finish(self, failed: bool = False) -> None: ...


class NullTracker:
    """``logger=none``: nothing is sent anywhere."""

    def log_summary(self, summary: dict[str, Any], run_dir: Path) -> None:
        pass

    def finish(self, failed: bool = False) -> None:
        pass


def _number(value: Any) -> float | None:
    """A finite float, or None for missing/NaN values (W&B charts skip None)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return None if math.isnan(value) else float(value)


def namespaced(summary: Mapping[str, Any]) -> dict[str, float | None]:
    """Summary metrics under W&B keys: ``speed/…``, ``accept/…``, ``asd/…``, ``category/…``.

    The task score (``summary["metric"]``, e.g. ``pass@1``) goes to ``score/<name>`` and
    ``score/baseline_<name>``; per-category blocks to ``category/<name>/<key>``.
    """
    out: dict[str, float | None] = {}
    for key, name in SUMMARY_KEYS.items():
        if key in summary:
            out[name] = _number(summary[key])
    for key, stem in CI_KEYS.items():
        if isinstance(summary.get(key), (list, tuple)) and len(summary[key]) == 2:
            out[f"{stem}_ci_low"], out[f"{stem}_ci_high"] = map(_number, summary[key])
    metric = summary.get("metric")
    for key in (metric, f"baseline_{metric}") if metric else ():
        if key in summary:
            out[f"score/{key}"] = _number(summary[key])
    for category, block in (summary.get("per_category") or {}).items():
        for key in ("speedup", "mat", "tokens_per_s", "retrieval_hit_rate", "n_prompts"):
            if key in block:
                out[f"category/{category}/{key}"] = _number(block[key])
    return out


def has_api_key(env: Mapping[str, str]) -> bool:
    """Whether W&B credentials are configured (env variable, or a netrc entry for the host)."""
    if env.get("WANDB_API_KEY"):
        return True
    host = urlparse(env.get("WANDB_BASE_URL", DEFAULT_HOST)).hostname
    path = Path(env.get("NETRC") or Path.home() / ".netrc").expanduser()
    try:
        return path.exists() and netrc.netrc(path).authenticators(host or "") is not None
    except (netrc.NetrcParseError, OSError):
        return False


def resolve_mode(mode: str, env: Mapping[str, str] | None = None) -> str:
    """``online`` / ``offline`` / ``disabled`` from ``logger.mode``; never a login prompt.

    ``auto`` follows ``WANDB_MODE`` when set, else online only with an API key. ``online``
    without a key falls back to offline (with a warning) instead of asking to log in.
    """
    env = os.environ if env is None else env
    if mode not in MODES:
        raise ConfigError(f"logger.mode={mode}: allowed values are {', '.join(MODES)}")
    if mode == "auto" and env.get("WANDB_MODE") in ("online", "offline", "disabled"):
        mode = str(env["WANDB_MODE"])
    if mode in ("auto", "online") and not has_api_key(env):
        if mode == "online":
            log.warning("logger.mode=online but no W&B API key is configured: logging offline")
        return "offline"
    return "online" if mode == "auto" else mode


def start(cfg: DictConfig, run_dir: Path, choices: dict[str, str]) -> Tracker:
    """The tracker selected by ``cfg.logger`` (``mode: disabled`` -> :class:`NullTracker`)."""
    logger = cfg.get("logger") or {}
    mode = resolve_mode(str(logger.get("mode", "disabled")))
    if mode == "disabled":
        return NullTracker()
    try:
        return WandbTracker.start(cfg, Path(run_dir), choices, mode)
    except Exception as error:
        log.warning("W&B not started (%s: %s); the run folder is still written",
                    type(error).__name__, error)  # fmt: skip
        return NullTracker()


def init_kwargs(cfg: DictConfig, run_dir: Path, choices: dict[str, str], mode: str) -> dict:
    """Arguments of ``wandb.init``: names, tags, the resolved config and the manifest."""
    logger = cfg.logger
    manifest_path = run_dir / records.MANIFEST_FILE
    manifest = records.read_json(manifest_path) if manifest_path.exists() else {}
    method, task = choices.get("method", "method"), choices.get("task", "task")
    lossy = manifest.get("lossless") is False
    tags = [*(logger.get("tags") or []), method, task, choices.get("verifier"),
            choices.get("model"), "lossy" if lossy else "lossless"]  # fmt: skip
    config = OmegaConf.to_container(cfg, resolve=True)
    config |= {"choices": choices, "run_dir": str(run_dir),
               "manifest": {k: v for k, v in manifest.items() if k != "config"}}  # fmt: skip
    return {
        "mode": mode,
        "project": logger.get("project") or "racer_bench",
        "entity": logger.get("entity"),
        "group": logger.get("group"),
        "job_type": logger.get("job_type") or method,
        "name": logger.get("name") or f"{method}-{task}-{run_dir.name}",
        "tags": list(dict.fromkeys(str(t)[:64] for t in tags if t)),
        "config": config,
        "dir": str(Path(logger.get("dir") or run_dir)),
    }


def histogram(summary: Mapping[str, Any]) -> Any:
    """``accept/hist``: steps by accepted draft tokens as a W&B histogram (unit-wide bins)."""
    import wandb

    hist = {int(k): int(v) for k, v in (summary.get("acceptance_hist") or {}).items()}
    if not hist:
        return None
    counts = [hist.get(i, 0) for i in range(max(hist) + 1)]
    edges = [i - 0.5 for i in range(len(counts) + 1)]
    return wandb.Histogram(np_histogram=(counts, edges))


class WandbTracker:
    """Logs one finished run to W&B from its run folder."""

    def __init__(self, run: Any, log_prompts: bool = True, log_figures: bool = True) -> None:
        self.run = run
        self.log_prompts = log_prompts
        self.log_figures = log_figures

    @classmethod
    def start(cls, cfg: DictConfig, run_dir: Path, choices: dict[str, str], mode: str
              ) -> WandbTracker:  # fmt: skip
        import wandb

        kwargs = init_kwargs(cfg, run_dir, choices, mode)
        Path(kwargs["dir"]).mkdir(parents=True, exist_ok=True)
        settings = wandb.Settings(silent=True, console="off", init_timeout=60)
        run = wandb.init(**kwargs, settings=settings)
        prompts, figures = (bool(cfg.logger.get(k, True)) for k in ("log_prompts", "log_figures"))
        return cls(run, prompts, figures)

    def log_summary(self, summary: dict[str, Any], run_dir: Path) -> None:
        try:
            self._log(summary, Path(run_dir))
        except Exception as error:
            log.warning("W&B logging failed (%s: %s); the run folder is intact",
                        type(error).__name__, error)  # fmt: skip

    def _log(self, summary: dict[str, Any], run_dir: Path) -> None:
        import wandb

        from racer_bench.analysis import frames, plots

        self.run.summary.update(namespaced(summary))
        data: dict[str, Any] = {}
        if (hist := histogram(summary)) is not None:
            data["accept/hist"] = hist
        run = frames.load_run(run_dir)
        if self.log_prompts and run.records:
            table = frames.prompts_frame([run]).astype(object)
            data["prompts"] = wandb.Table(dataframe=table.where(table.notna(), None))
        if self.log_figures and run.ok:
            for name, fig in plots.all_figures([run]).items():
                path = plots.save_figure(fig, run_dir / "figures", name, formats=("png",))[0]
                data[f"figures/{name}"] = wandb.Image(str(path))
        self.run.log(data)

    def finish(self, failed: bool = False) -> None:
        try:
            self.run.finish(exit_code=1 if failed else 0)
        except Exception as error:
            log.warning("W&B finish failed (%s: %s)", type(error).__name__, error)
