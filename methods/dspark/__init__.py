"""DSpark drafter package: head (block backbone, Markov and confidence heads), kind (training),
drafter.

``methods.dspark.DSparkDrafter`` is the ``_target_`` of ``conf/method/dspark.yaml`` and of saved
run folders, so the drafter is re-exported here.
"""

from methods.dspark.drafter import DSparkDrafter

__all__ = ["DSparkDrafter"]
