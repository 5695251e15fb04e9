"""The record of a node that cannot run ``ctxlab check`` at all: the environment-error record.

A node without a driver, without a usable GPU, without the device it was asked for, or without CUPTI
where check needs it still writes what it was asked to write (``--json``, ``--openmetrics``, ``--junit``,
``--markdown``) and exits 2 with its one line: a fleet sees it as a node that could not run instead of
losing it. The record is one ``ctxlab/1`` run (docs/schema.md, "A node that could not run"):

- ``lab`` is ``check``, ``claims`` and ``observations`` are empty;
- ``errors`` holds one error of kind ``environment`` with the one line the command printed, so a reader
  that does not know the record still shows a failed run with its reason;
- ``environment_error`` holds ``reason`` (one of ``REASONS``), ``message`` and ``missing`` (what
  ``ctxlab doctor`` found missing), and ``gpus`` (the GPUs the driver reported, if any);
- ``environment`` holds what could be read without a GPU: hostname, ctxlab, Python, package versions,
  the driver version where the driver answered.
"""

from __future__ import annotations

import datetime
import platform
import socket
from collections.abc import Mapping
from typing import Any

from ctxlab.records.model import LabResult

LAB = "check"
ERROR_KIND = "environment"
REASONS = ("no-driver", "no-bindings", "no-gpu", "driver-error", "device-missing", "cupti-missing")
REASON_TEXT = {
    "no-driver": "no NVIDIA driver (libcuda.so could not be loaded)",
    "no-bindings": "cuda-bindings is not installed",
    "no-gpu": "the driver sees no usable GPU",
    "driver-error": "the driver failed to initialise",
    "device-missing": "a device asked for does not exist",
    "cupti-missing": "CUPTI could not be loaded",
}


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


def is_environment_error(run: LabResult) -> bool:
    """True for the record of a node that could not run."""
    return bool(run.environment_error)


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


def describe(run: LabResult) -> str:
    """One line for people: the reason in words and the message the node printed."""
    error = run.environment_error
    reason = str(error.get("reason", "?"))
    return f"{REASON_TEXT.get(reason, reason)}: {error.get('message', '')}"
