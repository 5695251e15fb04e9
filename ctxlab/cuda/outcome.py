"""What a call did, as a name: the one outcome helper every lab shares.

Calls expected to fail, or in undefined-behaviour territory, are recorded
rather than raised. A CUDA status keeps its NAME (``CUDA_ERROR_INVALID_CONTEXT``,
``cudaErrorInvalidValue``), whichever library raised it (cuda.bindings through
``errors.check``, CuPy's runtime, driver or NVRTC layer); any other exception says
where it came from (``ctxlab.cuda.origin``, by its type and the place that raised it,
not its message): ``TypeName (STATUS): message`` from another library's CUDA error
path, ``TypeName: message`` for one of Python's own (a lab's bug), ``TypeName (not a
CUDA error): message`` for any other. A call whose right answer is known is
``correct`` or, when it returned a wrong value without an error, ``silent-wrong-result``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ctxlab.cuda.errors import CudaError, from_exception
from ctxlab.cuda.origin import outcome_text
from ctxlab.records.schema import SILENT_WRONG


def status_name(exc: BaseException) -> str:
    """The CUDA status name of a library error, or the exception with its origin (``origin.outcome_text``)."""
    return outcome_text(exc)


def outcome(fn: Callable[..., Any], *args: Any, call: str | None = None) -> dict:
    """``{"ok", "status", "value", "call"}`` for ``fn(*args)``; CUDA and CuPy errors become their status name."""
    try:
        value = fn(*args)
    except CudaError as exc:
        return {"ok": False, "status": exc.name, "call": call or exc.call}
    except Exception as exc:
        if from_exception(exc) is None:
            raise  # not a CUDA error: the experiment itself broke
        return {"ok": False, "status": status_name(exc), "call": call}
    return {"ok": True, "status": "CUDA_SUCCESS", "value": value, "call": call}


def attempt(fn: Callable[[], Any]) -> str:
    """``ok (value)`` or the error's name: for calls with no single right answer."""
    try:
        return f"ok ({fn()})"
    except Exception as exc:
        return status_name(exc)


def checked(fn: Callable[[], Any], expected: Any) -> str:
    """``correct``, ``silent-wrong-result (got X, expected Y)``, or the error's name."""
    try:
        got = fn()
    except Exception as exc:
        return status_name(exc)
    return "correct" if got == expected else f"{SILENT_WRONG} (got {got}, expected {expected})"
