"""Configuration: the one home of the config schemas, below every other folder but
:mod:`racer_bench.errors` and :mod:`racer_bench.system`.

* :mod:`.schema`: the checker (:func:`~.schema.check`: one-line ConfigError naming the key and
  what is allowed) and the annotation aliases constructors declare their keys with
  (``PositiveInt``, ``Probability`` ...).
* :mod:`.run`: :class:`~.run.RunConfig`, the schema of ``conf/config.yaml`` (run-level keys and
  the groups below them), and :data:`~.run.Engine`, the values of the ``engine`` key.
* :mod:`.backend`: :class:`~.backend.BackendConfig` (``conf/backend``).
* :mod:`.logger`: :class:`~.logger.LoggerConfig` (``conf/logger``).
* :mod:`.paths`: :class:`~.paths.PathsConfig` (``conf/paths``) and where things live
  (``REPO_ROOT``, ``CONF_DIR``, the cache).
* :mod:`.train`: :class:`~.train.TrainConfig` and its groups (``conf/train/config.yaml``).
* :mod:`.construct`: building objects from nodes (one-line errors, display keys).
* :mod:`.legacy`: today's names of the ``_target_`` values old records were saved with.

What is not here, and why. A group with ``_target_`` (model, method, verifier, task, scheduler)
has no dataclass: its target's signature is its schema (:mod:`.schema`), next to the code that
takes the keys. The scheduler group's settings objects
(:mod:`racer_bench.engine.schedule.settings`) are such targets: they build the engine's
schedulers, so they live in the engine, which sits above this folder; :class:`~.run.RunConfig`
types the ``scheduler`` node as any node with ``_target_``. The checks a schema cannot express
need objects from above (the scheduler's settings, the task's prompts), so
:func:`racer_bench.run.config.validate` lives in the run layer, beside the entry points that
call it once per run.
"""
