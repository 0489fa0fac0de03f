"""Libraries of the bench scripts, one module per script, named after it
(``scripts/bench_kernel_ab.py`` -> ``bench_kernel_ab``); ``common`` holds what they share."""
