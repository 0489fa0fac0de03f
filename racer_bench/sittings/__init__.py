"""A table's sittings as Hydra jobs (``python -m racer_bench.sittings table=<t> sitting=<i>``):
each job runs one sitting of every cell of the table (:mod:`racer_bench.run.sitting`), so any
Hydra launcher (basic, ``submitit_local``, ``submitit_slurm``, Ray) can take them; the
rankings pool them afterwards (:mod:`racer_bench.analysis.rankings`)."""
