"""Verifier grids that share one strict-greedy run per prompt (``scripts/asd_grid.py``).

A Hydra multirun over ASD's (B, g, M) pairs every job with its own strict-greedy run: right on
a cluster, but the strict decode is repeated once per grid point. Here the whole grid runs in
one process instead: per prompt, strict greedy once and every grid point back to back (the order
rotates with the prompt index, so machine noise hits all alike), then every output's target
log-probability and each point's answer agreement with strict (:mod:`racer_bench.run.paired`,
untimed). Each grid point is then written as an ordinary run folder (``manifest.json``,
``prompts.jsonl`` holding the shared strict record, ``summary.json``, ``.hydra/overrides.yaml``),
so ``scripts/collect_sweep.py``, the tables and the notebooks read them like multirun jobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf, open_dict
from tqdm.auto import tqdm

from racer_bench.config.construct import construct
from racer_bench.config.paths import CONF_DIR
from racer_bench.engine.verify.greedy import GreedyVerifier
from racer_bench.errors import ConfigError
from racer_bench.record import folder as records
from racer_bench.run import resolvers, runlock
from racer_bench.run.config import validate
from racer_bench.run.prompt import decode_steps, safe_run_prompt
from racer_bench.run.resume import differing_keys
from racer_bench.run.runner import finalize, native_manifest, warm_up
from racer_bench.run.setup import Mode, Setup, build
from racer_bench.run.threads import prompt_threads, run_load, thread_governor
from racer_bench.system import hardware

STRICT = "strict"


def compose_run(overrides: Sequence[str]) -> tuple[DictConfig, dict[str, str]]:
    """The run config for ``overrides`` and Hydra's group choices (``method: racer`` ...)."""
    resolvers.register()
    if GlobalHydra.instance().is_initialized():  # inside a Hydra job (a sitting): its conf/
        cfg = compose("config", list(overrides), return_hydra_config=True)
    else:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose("config", list(overrides), return_hydra_config=True)
    with open_dict(cfg):
        choices = {k: v for k, v in cfg.hydra.runtime.choices.items() if not k.startswith("hydra")}
        del cfg["hydra"]
    return cfg, choices


def point_name(index: int) -> str:
    return f"point{index}"


def build_grid(
    base: Sequence[str], points: Sequence[Sequence[str]], dirs: Sequence[Path] = ()
) -> tuple[Setup, list[Setup], list[dict[str, str]]]:
    """One shared setup (strict + every point), a per-point view of it for its run folder, and
    each point's group choices (for its manifest). Each point's config is checked once
    (:func:`validate`; :func:`build` does not repeat it), and checked against the run already in
    its folder of ``dirs``, before the model loads."""
    if not points:
        raise ConfigError("points: give at least one grid point")
    configs = [compose_run([*base, "baseline=none", *p]) for p in points]
    for (cfg, _), run_dir in zip(configs, dirs or [None] * len(configs), strict=True):
        validate(cfg)
        if run_dir is not None and (run_dir / records.MANIFEST_FILE).exists():
            saved = records.read_json(run_dir / records.MANIFEST_FILE)["config"]
            changed = differing_keys(saved, OmegaConf.to_container(cfg, resolve=True))
            if changed:
                keys = ", ".join(changed)
                raise ConfigError(f"{run_dir} holds a grid point run with other {keys}; "
                                  "write the grid to another folder")  # fmt: skip
    shared = build(configs[0][0])
    vocab_size = shared.target.vocab_size
    strict = Mode(STRICT, construct(shared.cfg.method, "method", vocab_size=vocab_size),
                  GreedyVerifier())  # fmt: skip
    views, modes = [], [strict]
    for index, (cfg, _) in enumerate(configs):
        drafter = construct(cfg.method, "method", vocab_size=vocab_size)
        mode = Mode(point_name(index), drafter, construct(cfg.verifier, "verifier"))
        modes.append(mode)
        views.append(replace(shared, cfg=cfg, modes=[replace(mode, name="method"), strict]))
    return replace(shared, modes=modes), views, [choices for _, choices in configs]


def split_record(record: dict[str, Any], index: int) -> dict[str, Any]:
    """The record of one grid point: its own generation as ``method`` plus the shared strict."""
    if record.get("status") != "ok":
        return record
    name = point_name(index)
    keys = ("id", "category", "index", "status", STRICT, f"{STRICT}_score", "threads")
    own = {"method": record[name], "score": record[f"{name}_score"]}
    if f"{name}_agreement" in record:
        own["agreement"] = record[f"{name}_agreement"]
    return {**{k: record[k] for k in keys if k in record}, **own}


def run_grid(
    base: Sequence[str], points: Sequence[Sequence[str]], out_dir: Path
) -> list[dict[str, Any]]:
    """Run every grid point against shared strict greedy; one run folder per point under
    ``out_dir`` (``0/``, ``1/`` ...); returns the summaries. Finished prompts are not redone."""
    dirs = [Path(out_dir) / str(i) for i in range(len(points))]
    with ExitStack() as held:
        for run_dir in dirs:
            run_dir.mkdir(parents=True, exist_ok=True)
            held.enter_context(runlock.hold(run_dir))
            records.drop_torn_tail(run_dir)  # a killed earlier attempt may have torn its last line
        return _run_grid(base, points, dirs)


def _run_grid(
    base: Sequence[str], points: Sequence[Sequence[str]], dirs: list[Path]
) -> list[dict[str, Any]]:
    shared, views, choices = build_grid(base, points, dirs)
    for index, (run_dir, view, point) in enumerate(zip(dirs, views, points, strict=True)):
        if not (run_dir / records.MANIFEST_FILE).exists():
            records.write_json(
                run_dir / records.MANIFEST_FILE, native_manifest(view, choices[index])
            )
            (run_dir / ".hydra").mkdir(exist_ok=True)
            overrides = [*base, *point, f"grid_point={index}"]
            (run_dir / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    done = set.intersection(*(records.finished_ids(d) for d in dirs))
    with shared.startup.phase("prompts"):
        prompts = shared.task.load()
    todo = [(i, p) for i, p in enumerate(prompts) if p.id not in done]
    warm_up(shared, prompts, bool(todo))  # the views share its Startup: each summary has it
    meter, steps, governor = hardware.LoadMeter().start(), 0, thread_governor(shared.cfg)
    for index, prompt in tqdm(todo, desc="grid", unit="prompt"):
        threads = prompt_threads(governor, shared)
        record = safe_run_prompt(shared, prompt, index) | {"threads": threads}
        steps += decode_steps(record)
        for point, run_dir in enumerate(dirs):
            records.append_prompt(run_dir, split_record(record, point))
    load = run_load(meter, steps, governor) if todo else None
    return [finalize(view, run_dir, load=load) for view, run_dir in zip(views, dirs, strict=True)]
