"""Kernel A/B: builds from the working tree or a revision, swapped into a loaded model."""

from __future__ import annotations

import subprocess

import pytest

from racer_bench.bench import bench_kernel_ab as kernel_ab
from racer_bench.engine.fast import kernel_library
from tests.conftest import REPO

pytestmark = pytest.mark.skipif(
    kernel_library.unavailable_reason() is not None,
    reason=f"small GEMM kernel unavailable: {kernel_library.unavailable_reason()}",
)


def test_swapped_library_routes_calls_inside_the_block_only(tmp_path) -> None:
    loaded = kernel_library.library()
    other = kernel_ab.build(kernel_ab.WORKTREE, tmp_path)
    assert other is not loaded
    with kernel_library.swapped_library(other):
        assert kernel_library.library() is other
    assert kernel_library.library() is loaded


def test_a_build_of_the_worktree_gives_the_loaded_kernels_bits(tiny_bf16_target, tmp_path):
    """The same sources built apart agree bit for bit on random trees (the check the bench
    prints for every row), and the cache is rolled back after each forward."""
    target = tiny_bf16_target
    target.prefill([5, 9, 3, 7, 11, 2])
    before = target.length
    libs = {"loaded": kernel_library.library(), "worktree": kernel_ab.build("worktree", tmp_path)}
    assert kernel_ab.logits_agree(target, 4, libs, [1, 5, 16]) == {1: True, 5: True, 16: True}
    assert target.length == before
    medians = kernel_ab.measure({"bfloat16": (target, 4)}, libs, [1, 5], reps=1)
    assert set(medians) == {("bfloat16", b, n) for b in libs for n in (1, 5)}
    text = kernel_ab.table(medians, {"bfloat16": {1: True, 5: False}}, list(libs))
    assert "| bfloat16 | 5 |" in text and text.rstrip().endswith("| **no** |")


def test_an_unknown_revision_is_one_clear_error(tmp_path) -> None:
    with pytest.raises(SystemExit, match="--builds no-such-rev: git cannot show"):
        kernel_ab.build("no-such-rev", tmp_path)
    with pytest.raises(SystemExit, match="--builds no-such-rev: not a git revision here"):
        kernel_ab.resolve("no-such-rev")


def test_builds_are_named_by_short_sha() -> None:
    sha = kernel_ab.resolve("HEAD")
    assert len(sha) >= 7 and all(c in "0123456789abcdef" for c in sha)
    assert kernel_ab.resolve(kernel_ab.WORKTREE) == kernel_ab.WORKTREE


OLD_LAYOUT = "8dcfff2"  # the last commit with the C sources in racer_bench/engine/csrc/


def test_a_revision_from_before_the_fast_package_still_builds_its_sources() -> None:
    known = subprocess.run(["git", "cat-file", "-e", f"{OLD_LAYOUT}^{{commit}}"], cwd=REPO,
                           capture_output=True)  # fmt: skip
    if known.returncode != 0:
        pytest.skip(f"{OLD_LAYOUT} is not in this clone's history")
    old = kernel_ab.kernel_sources(OLD_LAYOUT)
    assert {"small_gemm.c", "row_attention.c", "decoder_layer.c"} <= set(old)
    assert old == kernel_ab.kernel_sources(kernel_ab.WORKTREE)  # the move changed no source
