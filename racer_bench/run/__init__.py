"""The run lifecycle: build a run from its config, run it prompt by prompt (AR and method
interleaved), resume it, lock its folder, sweep grids, and the bench scripts' shared timing."""
