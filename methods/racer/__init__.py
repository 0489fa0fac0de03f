"""RACER drafter package: automaton (retrieval tree), TokenBin (logits tree), drafter."""

from methods.racer.drafter import RacerDrafter

__all__ = ["RacerDrafter"]
