"""Configuration: the schemas that check every key (:mod:`.schema`), the run-level and
backend groups, where things live (:mod:`.paths`) and building objects from
nodes (:mod:`.construct`). Below every other folder but :mod:`racer_bench.system`."""
