"""ctxlab's build backend: setuptools', after one check that this Python is new enough (pyproject.toml names
it in ``[build-system]`` with ``backend-path``).

On an older Python, pip learns that the project needs 3.11 only once it has resolved the project's
dependencies, and with Python 3.10 it backtracked through versions of rich, pyyaml and pytest for more than
five minutes instead. pip asks a backend what it needs to build before it resolves anything else, so here
the first hook says in one line which Python is needed; ``[build-system] requires`` is empty and setuptools
is asked for by that hook, after the check, so nothing at all is installed first.
"""

from __future__ import annotations

import sys
from typing import Any

REQUIRED = (3, 11)  # pyproject.toml's requires-python (tests/house/test_newcomer.py holds the two together)
SETUPTOOLS = "setuptools>=70.1"  # the first that builds wheels itself (68-70.0 need wheel's bdist_wheel)


def check_python(version: tuple[int, ...] | None = None) -> None:
    """SystemExit with one line where ``version`` (this Python's) is older than ``REQUIRED``."""
    found = tuple(sys.version_info[:3]) if version is None else tuple(version)
    if found[:2] < REQUIRED:
        need = ".".join(map(str, REQUIRED))
        raise SystemExit(f"ctxlab needs Python {need} or newer; this is Python {'.'.join(map(str, found))} "
                         f"({sys.executable}): make the venv with python{need} or newer")


def _setuptools() -> Any:
    from setuptools import build_meta

    return build_meta


def _requires(hook: str, config_settings: dict | None) -> list[str]:
    check_python()
    try:
        extra = getattr(_setuptools(), hook)(config_settings)
    except ImportError:  # a fresh build environment: setuptools comes with what this hook asks for
        extra = []
    return [SETUPTOOLS, *extra]


def get_requires_for_build_wheel(config_settings: dict | None = None) -> list[str]:
    """What building a wheel needs, once this Python is known to be new enough."""
    return _requires("get_requires_for_build_wheel", config_settings)


def get_requires_for_build_editable(config_settings: dict | None = None) -> list[str]:
    """What an editable install (pip install -e) needs, once this Python is known to be new enough."""
    return _requires("get_requires_for_build_editable", config_settings)


def get_requires_for_build_sdist(config_settings: dict | None = None) -> list[str]:
    """What building a source distribution needs, once this Python is known to be new enough."""
    return _requires("get_requires_for_build_sdist", config_settings)


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: dict | None = None) -> str:
    """setuptools' hook, after the check."""
    check_python()
    return _setuptools().prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def prepare_metadata_for_build_editable(metadata_directory: str, config_settings: dict | None = None) -> str:
    """setuptools' hook, after the check."""
    check_python()
    return _setuptools().prepare_metadata_for_build_editable(metadata_directory, config_settings)


def build_wheel(wheel_directory: str, config_settings: dict | None = None,
                metadata_directory: str | None = None) -> str:
    """setuptools' hook, after the check."""
    check_python()
    return _setuptools().build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory: str, config_settings: dict | None = None,
                   metadata_directory: str | None = None) -> str:
    """setuptools' hook, after the check."""
    check_python()
    return _setuptools().build_editable(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory: str, config_settings: dict | None = None) -> str:
    """setuptools' hook, after the check."""
    check_python()
    return _setuptools().build_sdist(sdist_directory, config_settings)
