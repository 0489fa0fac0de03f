"""racer_bench: a benchmarking harness for training-free speculative decoding."""

from racer_bench import resolvers

resolvers.register()
