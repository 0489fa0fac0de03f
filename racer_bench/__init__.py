"""racer_bench: a benchmarking harness for training-free speculative decoding.

Importing the package registers nothing: the OmegaConf resolvers that ``conf/`` uses
(:mod:`racer_bench.run.resolvers`) are registered by whoever composes ``conf/`` (the command
line, the verifier grid, the bench scripts' compose, the tests), so a drafter that imports
``racer_bench.engine.tree`` loads the engine and nothing above it.
"""
