"""Turn the ``(status, value...)`` tuples of cuda.bindings into values or errors.

A ``CudaError`` carries the status NAME (``CUDA_ERROR_INVALID_CONTEXT``), its
number and NVIDIA's explanation, and pickles, so a child process can hand it
back to its parent.
"""

from __future__ import annotations

from typing import Any


class NoGpu(Exception):
    """CUDA cannot be used here: no driver, no GPU, or CUDA libraries missing."""


class CudaError(Exception):
    """A CUDA status that is not success: its NAME, number, NVIDIA's explanation and the call."""
    def __init__(self, name: str, code: int, explanation: str | None = None, call: str | None = None):
        super().__init__(name, code, explanation, call)
        self.name = name
        self.code = code
        self.explanation = explanation
        self.call = call

    def __reduce__(self):
        return (CudaError, (self.name, self.code, self.explanation, self.call))

    def __str__(self) -> str:
        where = f"{self.call}: " if self.call else ""
        why = f": {self.explanation}" if self.explanation else ""
        return f"{where}{self.name} ({self.code}){why}"

    def to_dict(self) -> dict[str, Any]:
        """The error as JSON fields."""
        return {"error": self.name, "code": self.code, "explanation": self.explanation, "call": self.call}


def _explain(status) -> str | None:
    """NVIDIA's sentence for a status; None where the library that knows it cannot be loaded."""
    kind = type(status).__name__
    try:
        if kind == "CUresult":
            from cuda.bindings import driver

            err, text = driver.cuGetErrorString(status)
        elif kind == "cudaError_t":
            from cuda.bindings import runtime

            err, text = runtime.cudaGetErrorString(status)
        elif kind == "nvrtcResult":
            from cuda.bindings import nvrtc

            err, text = nvrtc.nvrtcGetErrorString(status)
        else:
            return None
    except Exception:  # no driver or library on this machine: the name still tells
        return None
    if int(err) != 0 or text is None:
        return None
    return text.decode() if isinstance(text, bytes) else str(text)


def error_from(status, call: str | None = None) -> CudaError:
    """A CudaError for a cuda.bindings status (CUresult, cudaError_t, nvrtcResult)."""
    name = getattr(status, "name", None) or f"status {int(status)}"
    return CudaError(name, int(status), _explain(status), call)


def check(result, call: str | None = None):
    """``(status,)`` -> None, ``(status, v)`` -> v, ``(status, v1, v2...)`` -> (v1, v2...)."""
    if not isinstance(result, tuple):
        result = (result,)
    status, values = result[0], result[1:]
    if int(status) != 0:
        raise error_from(status, call)
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def from_exception(exc: BaseException, call: str | None = None) -> CudaError | None:
    """A CudaError for an exception raised by CuPy's runtime or driver layer; None for others (a type of the same
    name that is not CuPy's own, a lab's or a mock's, among them: ``ctxlab.cuda.origin``)."""
    if isinstance(exc, CudaError):
        return exc
    status = getattr(exc, "status", None)
    kind = type(exc).__name__
    if status is None or kind not in ("CUDARuntimeError", "CUDADriverError", "NVRTCError"):
        return None
    if type(exc).__module__.split(".")[0] not in ("cupy_backends", "cupy"):
        return None
    try:
        if kind == "CUDARuntimeError":
            from cuda.bindings.runtime import cudaError_t as enum
        elif kind == "CUDADriverError":
            from cuda.bindings.driver import CUresult as enum
        else:
            from cuda.bindings.nvrtc import nvrtcResult as enum
        return error_from(enum(int(status)), call)
    except Exception:
        return CudaError(str(exc).split(":")[0], int(status), str(exc), call)
