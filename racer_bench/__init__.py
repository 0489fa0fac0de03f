"""racer_bench: a benchmarking harness for training-free speculative decoding."""

from racer_bench.config import resolvers

resolvers.register()
