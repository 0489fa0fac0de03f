"""Medusa drafter package: head (the K heads), kind (training), drafter.

``methods.medusa.MedusaDrafter`` is the ``_target_`` of ``conf/method/medusa.yaml`` and of saved
run folders, so the drafter is re-exported here.
"""

from methods.medusa.drafter import MedusaDrafter

__all__ = ["MedusaDrafter"]
