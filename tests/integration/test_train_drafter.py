"""scripts/train_drafter.py on the tiny model: loss falls, checkpoint loads, resume continues."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from methods.eagle3 import Eagle3Drafter
from methods.medusa import MedusaDrafter
from tests.conftest import TINY_PROMPTS, ar_tokens, run_generate

ROOT = Path(__file__).resolve().parents[2]
DRAFTERS = {"medusa": MedusaDrafter, "eagle3": Eagle3Drafter}


def train(tmp_path: Path, kind: str, steps: int) -> dict:
    args = [
        sys.executable, str(ROOT / "scripts" / "train_drafter.py"), f"kind={kind}",
        "model=tiny_random", "model_name=tiny", "data.n_code=4", "data.n_chat=2",
        "data.max_new_tokens=16", "data.batch_size=6", f"train.max_steps={steps}",
        "train.save_every=10", "train.log_every=10", "train.lr=3e-3", "head.attn_heads=4",
        "head.intermediate_size=64", f"hydra.run.dir={tmp_path / 'hydra'}",
    ]  # fmt: skip
    env = {**os.environ, "RACER_BENCH_CACHE": str(tmp_path), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((tmp_path / "drafters" / "tiny" / f"{kind}.json").read_text())


@pytest.mark.parametrize("kind", ["medusa", "eagle3"])
def test_training_lowers_the_loss_and_the_head_drafts(tmp_path, kind, tiny_target) -> None:
    summary = train(tmp_path, kind, steps=40)
    assert summary["steps"] == 40 and summary["sequences"] == 6 and summary["resumed_from"] == 0
    curve = summary["loss_curve"]
    assert sum(curve[-3:]) / 3 < sum(curve[:3]) / 3
    assert (tmp_path / "drafters" / "tiny" / "distill.pt").exists()
    checkpoint = tmp_path / "drafters" / "tiny" / f"{kind}.pt"
    drafter = DRAFTERS[kind](260, checkpoint=str(checkpoint))
    prompt = list(TINY_PROMPTS[0])
    result = run_generate(tiny_target, drafter, prompt, max_new_tokens=24)
    assert result.tokens == ar_tokens(tiny_target, prompt, max_new_tokens=24)
    resumed = train(tmp_path, kind, steps=50)  # continues from the saved state
    assert resumed["steps"] == 50 and resumed["resumed_from"] == 40
