"""MGSM-ZH (Shi et al. 2022): the first 250 GSM8K test problems in Chinese, few-shot CoT.

Same protocol as :mod:`racer_bench.tasks.gsm8k` with Chinese exemplars (``问题：`` /
``逐步解答：`` / ``答案是 N。``); gold answers are integers (4 with thousands separators).
"""

from __future__ import annotations

from typing import ClassVar

from racer_bench.tasks.base import Prompt
from racer_bench.tasks.exemplars import MGSM_ZH_EXEMPLARS
from racer_bench.tasks.gsm8k import GSM8KTask


class MGSMZhTask(GSM8KTask):
    """MGSM Chinese (250 GSM8K problems translated), read from ``<data_dir>/mgsm/mgsm_zh.tsv``."""

    name: ClassVar[str] = "mgsm_zh"
    question_prefix: ClassVar[str] = "问题："
    answer_prefix: ClassVar[str] = "逐步解答："
    exemplars: ClassVar[tuple[tuple[str, str], ...]] = MGSM_ZH_EXEMPLARS

    def load_all(self) -> list[Prompt]:
        with self.data_path().open(encoding="utf-8") as f:
            rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
        return [
            Prompt(
                id=f"{self.name}/{i:03d}",
                category=self.name,
                turns=[question],
                reference={"answer": answer.replace(",", "")},
            )
            for i, (question, answer) in enumerate(rows)
        ]
