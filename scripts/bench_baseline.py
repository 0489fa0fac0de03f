"""Is our AR loop a fair baseline? Our loop vs transformers generate, interleaved, one process.

    python scripts/bench_baseline.py --limit 20 --max-new-tokens 256

Prints tok/s of our AR loop and of ``generate(do_sample=False)`` (ours must be >= 0.95x), and
the prompt-lookup speedups: transformers ``generate(prompt_lookup_num_tokens=10)`` over
``generate()``, and our PLD over our AR, on the same HumanEval prompts. It is
``bench_methods.py`` with those contenders fixed.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.argv[1:1] = ["--hf-generate", "--methods", "pld"]
    runpy.run_path(str(Path(__file__).with_name("bench_methods.py")), run_name="__main__")
