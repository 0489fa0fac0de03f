"""Numbers the papers report, with their source, shown beside ours in separate table columns.

These are facts from the cited papers and leaderboards (7B-13B models on data-centre GPUs),
not results of this harness: a reader compares them with our CPU-sized model to see where the
picture changes. Values marked ``≈`` are approximate readings of the source. Check a value
against its source before quoting it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    """Where a reported number comes from."""

    short: str  # column label
    citation: str  # full reference
    setting: str  # model, hardware and decoding setting of the numbers


@dataclass(frozen=True)
class Reported:
    """One reported number: ``text`` as it should be printed, ``value`` when it is one number."""

    text: str
    value: float | None = None


SOURCES = {
    "racer": Source(
        "RACER paper",
        "Zhang, Li, Zhang, Wang, Zhao. RACER: Retrieval-Augmented Contextual Rapid Speculative "
        "Decoding. Findings of ACL 2026, arXiv:2604.14885",
        "Vicuna-7B, Spec-Bench, greedy, batch 1",
    ),
    "spec_bench": Source(
        "Spec-Bench leaderboard",
        "Xia et al. Spec-Bench leaderboard, github.com/hemingkx/Spec-Bench (Leaderboard.md @ "
        "fd2c1cd)",
        "Vicuna-7B-v1.3, A100, FP16, greedy, batch 1",
    ),
    "logitspec": Source(
        "LogitSpec paper",
        "Liu, Lv, Li, Gao, Sun et al. LogitSpec. arXiv:2507.01449",
        "headline over its benchmarks (best case), greedy",
    ),
    "asd": Source(
        "ASD paper",
        "Feng, Peng, Xie, Ye, Chen, Yao, Zhou, Kang. Approximate Speculative Decoding. "
        "arXiv:2608.03447",
        "Qwen3-14B target, DSpark-14B drafter, frozen B=8, g=0.25, M=2, 7 tasks",
    ),
}

# Spec-Bench overall speedup (x) and MAT as printed in RACER's comparison.
RACER_SPEC_BENCH: dict[str, dict[str, Reported]] = {
    "racer": {"speedup": Reported("2.21×", 2.21), "mat": Reported("3.00", 3.00)},
    "recycling": {"speedup": Reported("2.06×", 2.06)},
    "logitspec": {"speedup": Reported("1.77×", 1.77)},
    "pld": {"speedup": Reported("1.50×", 1.50)},
}

# Spec-Bench leaderboard, A100 / Vicuna-7B: overall speedup and MAT.
SPEC_BENCH_LEADERBOARD: dict[str, dict[str, Reported]] = {
    "recycling": {"speedup": Reported("2.22×", 2.22), "mat": Reported("2.73", 2.73)},
    "pld": {"speedup": Reported("1.66×", 1.66), "mat": Reported("1.75", 1.75)},
    "rest": {"speedup": Reported("1.48×", 1.48), "mat": Reported("1.82", 1.82)},
    "lookahead": {"speedup": Reported("1.34×", 1.34), "mat": Reported("1.64", 1.64)},
}

# RACER ablations on Spec-Bench: MAT per variant (keys: frames.variant_string of the overrides).
RACER_ABLATION_MAT: dict[str, Reported] = {
    "": Reported("3.00", 3.00),
    "retrieval=false": Reported("≈2.76", 2.76),  # logits tree only
    "logits=false": Reported("≈1.82", 1.82),  # retrieval tree only
    "logit_source=last": Reported("1.57 (copy: 1.87)", 1.57),  # the paper's copy vs last study
}

LOGITSPEC_HEADLINE: dict[str, Reported] = {
    "speedup": Reported("up to 2.61×", 2.61),
    "mat": Reported("3.28", 3.28),
}

# ASD vs strict greedy with the same drafter.
ASD_REPORTED: dict[str, Reported] = {
    "gain": Reported("+3.9 to +11.7 % (mean ≈ +7.8 %)"),
    "mat": Reported("3.85 → 4.20"),
    "accuracy_delta_humaneval": Reported("−0.61 pp", -0.61),
    "divergence_math": Reported("> 95 % of requests (GSM8K, MATH)"),
}
ASD_FROZEN = {"verifier.budget": 8.0, "verifier.gate": 0.25, "verifier.cap": 2}


def column(source: str) -> str:
    """Column header of a source's numbers, e.g. ``"RACER paper"``."""
    return SOURCES[source].short


def citations(keys: list[str]) -> list[str]:
    """One note per source: its label, setting and reference."""
    return [f"{SOURCES[k].short}: {SOURCES[k].setting}. {SOURCES[k].citation}." for k in keys]
