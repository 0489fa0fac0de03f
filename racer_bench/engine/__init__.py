"""The decoding engine: one decode loop, the target's forward and KV cache, drafts and verifiers."""
