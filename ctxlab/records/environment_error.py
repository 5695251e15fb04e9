"""The record of a node that could not run ``ctxlab check`` at all, as a reader sees it: its reasons, whether a
run is one, and one line for people. Making the record (which probes the environment) is
``ctxlab.cuda.environment_error``.

The record is one ``ctxlab/1`` run (docs/schema.md, "A node that could not run"):

- ``lab`` is ``check``, ``claims`` and ``observations`` are empty;
- ``errors`` holds one error of kind ``environment`` with the one line the command printed, so a reader
  that does not know the record still shows a failed run with its reason;
- ``environment_error`` holds ``reason`` (one of ``REASONS``), ``message`` and ``missing`` (what
  ``ctxlab doctor`` found missing), and ``gpus`` (the GPUs the driver reported, if any);
- ``environment`` holds what could be read without a GPU: hostname, ctxlab, Python, package versions,
  the driver version where the driver answered.
"""

from __future__ import annotations

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


def is_environment_error(run: LabResult) -> bool:
    """True for the record of a node that could not run."""
    return bool(run.environment_error)


def describe(run: LabResult) -> str:
    """One line for people: the reason in words and the message the node printed."""
    error = run.environment_error
    reason = str(error.get("reason", "?"))
    return f"{REASON_TEXT.get(reason, reason)}: {error.get('message', '')}"
