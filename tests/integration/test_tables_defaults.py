"""Tables from real runs made at today's defaults: no scheduler override, so ``scheduler=auto``."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.test_cli import TINY, cli
from tests.integration.test_tables import md_rows
from tests.scripts import load_script


def test_main_table_builds_from_runs_at_the_default_scheduler(tmp_path: Path) -> None:
    """Found by hand: PLD and RACER run without overrides (auto -> confidence on a CPU) gave
    "no table can be built", because the main table kept fixed-scheduler runs only."""
    results = tmp_path / "results"
    schedulers = {}
    for method in ("pld", "racer"):
        proc = cli(*TINY, f"method={method}", tmp_path=results / method)
        assert proc.returncode == 0, proc.stderr
        manifest = json.loads((results / method / "manifest.json").read_text())
        schedulers[method] = manifest["scheduler"]
    assert set(schedulers.values()) == {"confidence"}, schedulers  # auto on a CPU picks it
    out = tmp_path / "tables.md"
    built = load_script("make_tables").main(["--results", str(results), "--out", str(out)])
    assert built[0].key == "main"
    main = out.read_text().split("### ")[1]
    header = next(line for line in main.splitlines() if line.startswith("| method"))
    assert header.startswith("| method | scheduler |")
    rows = md_rows(main)
    assert {name: row[1] for name, row in rows.items()} == {
        "PLD": "confidence",
        "RACER": "confidence",
    }
    assert all(row[2].endswith(")") and "×" in row[2] for row in rows.values())
