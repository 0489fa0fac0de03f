"""The machine: hardware fingerprint, load meter and thread governor (:mod:`.hardware`), and
signal handling that keeps written records whole (:mod:`.interrupts`). Imports nothing above."""
