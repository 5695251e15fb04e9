"""Making the record of a node that could not run ``ctxlab check`` at all (the environment-error record).

A node without a driver, without a usable GPU, without the device it was asked for, or without CUPTI
where check needs it still writes what it was asked to write (``--json``, ``--openmetrics``, ``--junit``,
``--markdown``) and exits 2 with its one line: a fleet sees it as a node that could not run instead of
losing it. What the record holds, and reading it: ``ctxlab.records.environment_error``.
"""

from __future__ import annotations

import datetime
import platform
import socket
from collections.abc import Mapping
from typing import Any

from ctxlab.records.environment_error import ERROR_KIND, LAB
from ctxlab.records.model import LabResult


def reason_of(exc: BaseException) -> str:
    """Which of ``REASONS`` an exception of the environment says (NoGpu, BadDevice, TraceUnavailable)."""
    name = type(exc).__name__
    text = str(exc)
    if name == "BadDevice":
        return "device-missing"
    if name == "TraceUnavailable":
        return "cupti-missing"
    if "cuda-bindings is not installed" in text:
        return "no-bindings"
    if "no NVIDIA driver" in text or "libcuda" in text:
        return "no-driver"
    if "cuInit failed" in text and "NO_DEVICE" not in text:
        return "driver-error"
    return "no-gpu"


def _found_environment(found: Mapping[str, Any]) -> dict:
    """The environment keys that can be read without a GPU, from what ``doctor`` found."""
    from ctxlab.cuda.environment import package_version
    from ctxlab.version import __version__

    env: dict[str, Any] = {"hostname": str(found.get("hostname") or socket.gethostname()),
                           "ctxlab": __version__, "python": str(found.get("python") or platform.python_version()),
                           "cupy": package_version("cupy-cuda13x") or package_version("cupy-cuda12x"),
                           "cuda_bindings": package_version("cuda-bindings"),
                           "cupti_python": package_version("cupti-python")}
    driver = found.get("driver")
    if isinstance(driver, Mapping) and driver.get("ok") and isinstance(driver.get("version"), int):
        env["driver_version"] = driver["version"]
    cupy = found.get("cupy")
    if isinstance(cupy, Mapping) and cupy.get("ok") and isinstance(cupy.get("runtime_version"), int):
        env["runtime_version"] = cupy["runtime_version"]
    return env


def _gpus(found: Mapping[str, Any]) -> list[str]:
    driver = found.get("driver")
    devices = driver.get("devices", []) if isinstance(driver, Mapping) and driver.get("ok") else []
    return [str(d.get("name", "?")) for d in devices if isinstance(d, Mapping)]


def environment_error_run(exc: BaseException, message: str, options: Mapping[str, Any] | None = None,
                          found: Mapping[str, Any] | None = None, started: str | None = None,
                          seconds: float = 0.0) -> LabResult:
    """The record of a node that could not run: ``exc`` is what stopped it, ``message`` the one line printed,
    ``options`` what check was asked (devices, labs), ``found`` what ``doctor`` found (probed when None)."""
    if found is None:
        from ctxlab.cuda.environment import doctor

        found = doctor()
    options = dict(options or {})
    env = _found_environment(found)
    device = options.get("device")
    if isinstance(device, int) and not isinstance(device, bool) and device >= 0:
        env["device"] = device
    missing = [str(m) for m in found.get("missing", [])] if isinstance(found.get("missing"), list) else []
    started = started or datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return LabResult(lab=LAB, started=started, seconds=max(0.0, seconds), environment=env, options=options,
                     observations=(), claims=(),
                     errors=({"scenario": "environment", "kind": ERROR_KIND, "message": message,
                              "output_tail": "\n".join(missing)},),
                     environment_error={"reason": reason_of(exc), "message": message, "missing": missing,
                                        "gpus": _gpus(found)})
