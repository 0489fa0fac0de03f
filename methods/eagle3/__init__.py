"""EAGLE-3 drafter package: head (network), checkpoint (trained or published weights), kind
(training), drafter.

``methods.eagle3.Eagle3Drafter`` is the ``_target_`` of ``conf/method/eagle3.yaml`` and of saved
run folders, so the drafter is re-exported here.
"""

from methods.eagle3.drafter import Eagle3Drafter

__all__ = ["Eagle3Drafter"]
