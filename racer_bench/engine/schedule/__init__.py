"""How much of a draft to verify: schedulers, their settings, online acceptance estimates and the
target's cost curve."""
