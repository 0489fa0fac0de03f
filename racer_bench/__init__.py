"""racer_bench: a benchmarking harness for training-free speculative decoding."""

from racer_bench.run import resolvers  # the resolvers conf/ uses, registered on import

resolvers.register()
