"""The fast engine: row-invariant C kernels behind ``HFTarget`` (packed GEMMs, row attention, the
one-call Llama layer stack), their probes, the weight-read floor and the engine and dtype
choice."""
