"""The machine: hardware fingerprint, load meter and thread governor (:mod:`.hardware`), and
signal handling that keeps written records whole (:mod:`.interrupts`), whole-file writes that
two processes can make at once (:mod:`.files`). Imports nothing above."""
