"""Which exceptions are CUDA errors: told by where they come from, never by what their message says.

A lab's bug can raise a library's exception whose message names a CUDA call or status (a mock raising
Numba's ``CudaAPIError(999, "cuMemcpyDtoH ...")``, cuda.core's ``CUDAError`` for a device not yet set), and a
CUDA error can read like anything. So an exception is a CUDA error only by its type and the place that raised it:

- ctxlab's ``CudaError`` (``errors.check``: a status cuda.bindings returned) and CuPy's ``CUDARuntimeError``,
  ``CUDADriverError`` and ``NVRTCError`` (types of CuPy's own modules, made only from a status): the status
  name, as ``errors.from_exception`` gives it;
- PyTorch's ``torch.AcceleratorError`` carrying ``error_code`` (set only where torch's C++ turns a failed CUDA
  call into the exception; one a program raises itself has none): the ``cudaError_t`` of that code;
- Numba's ``CudaAPIError`` raised inside Numba's driver module (its check of each driver call's status; raised
  anywhere else, a mock or a lab, it is not): the ``CUresult`` of its code;
- cuda.core's ``CUDAError``/``NVRTCError`` raised inside cuda.core's ``cuda_utils`` (its checks of a returned
  status; cuda.core raises the same type for its own refusals elsewhere): a CUDA error whose status it does not
  carry;
- JAX's runtime error (``XlaRuntimeError``, ``JaxRuntimeError``) with XLA's status code ``INTERNAL`` (what its
  CUDA error path returns: the code heads the message, the exception has no other field for it), chained to no
  Python exception and naming none (a host callback's failure): a CUDA error whose status it does not carry.

Anything else is not a CUDA error: an exception of Python's own (``TypeError``, ``KeyError``: a lab's bug), or a
library's exception raised anywhere but its CUDA error path. ``outcome_text`` writes which one it was into the
outcome an observation records (the forms are ``ctxlab.records.schema``'s), so that drift compares origins.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from ctxlab.cuda.errors import from_exception
from ctxlab.records.evidence import names_pythons_own
from ctxlab.records.schema import A_CUDA_ERROR, NOT_A_CUDA_ERROR


def raised_in(exc: BaseException) -> tuple[str, str]:
    """The module and the function of the frame that raised ``exc`` (the innermost of its traceback; a Cython
    frame names its function with the module in front, which is dropped); ``("", "")`` if it was never raised."""
    tb: TracebackType | None = exc.__traceback__
    if tb is None:
        return "", ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    frame = tb.tb_frame
    return str(frame.f_globals.get("__name__", "")), frame.f_code.co_name.rsplit(".", 1)[-1]


def _status_name(layer: str, code: Any) -> str:
    """The name of a CUDA status number (``layer``: "driver" or "runtime"); A_CUDA_ERROR where it cannot be read."""
    name = getattr(code, "name", None)  # a cuda.bindings enum already
    if isinstance(name, str):
        return name
    try:
        if layer == "driver":
            from cuda.bindings.driver import CUresult as enum
        else:
            from cuda.bindings.runtime import cudaError_t as enum
        return str(enum(int(code)).name)
    except Exception:  # no cuda.bindings, or a number it does not know: still a CUDA error
        return A_CUDA_ERROR


def _failed(code: Any) -> bool:
    """Whether ``code`` is a status number other than success."""
    try:
        return int(code) != 0
    except (TypeError, ValueError):
        return False


def _of(exc: BaseException, names: tuple[str, ...], *packages: str) -> bool:
    """Whether ``exc``'s type is one of ``names`` and defined in one of ``packages``."""
    kind = type(exc)
    return kind.__name__ in names and kind.__module__.split(".")[0] in packages


def cuda_error(exc: BaseException) -> str | None:
    """The status of a CUDA error by its origin (the module docstring says which): its name, or A_CUDA_ERROR
    where the library does not carry it; None for any exception that is not a CUDA error."""
    err = from_exception(exc)
    if err is not None:
        return err.name
    if _of(exc, ("AcceleratorError",), "torch"):
        code = getattr(exc, "error_code", None)
        return _status_name("runtime", code) if isinstance(code, int) else None
    module, _ = raised_in(exc)
    if _of(exc, ("CudaAPIError",), "numba", "numba_cuda"):
        inside = module.split(".")[0] in ("numba", "numba_cuda") and module.endswith("cudadrv.driver")
        code = getattr(exc, "code", None)
        return _status_name("driver", code) if inside and _failed(code) else None
    if _of(exc, ("CUDAError", "NVRTCError"), "cuda"):
        inside = module.startswith("cuda.core") and module.endswith("cuda_utils")
        return A_CUDA_ERROR if type(exc).__module__.startswith("cuda.core") and inside else None
    if _of(exc, ("XlaRuntimeError", "JaxRuntimeError"), "jax", "jaxlib"):
        text = str(exc)
        chained = exc.__cause__ is not None or names_pythons_own(text)
        return A_CUDA_ERROR if text.startswith("INTERNAL: ") and not chained else None
    return None


def outcome_text(exc: BaseException) -> str:
    """An exception as the outcome an observation records, saying its origin: a CUDA status by its name
    (``CUDA_ERROR_INVALID_CONTEXT``: ctxlab's and CuPy's errors), another CUDA error as ``Type (STATUS):
    message``, an exception of Python's own as ``Type: message``, any other as ``Type (not a CUDA error):
    message``."""
    err = from_exception(exc)
    if err is not None:
        return err.name
    kind = type(exc)
    if kind.__module__ == "builtins":  # Python's own: never a CUDA error, read as ever
        return f"{kind.__name__}: {exc}"
    return f"{kind.__name__} ({cuda_error(exc) or NOT_A_CUDA_ERROR}): {exc}"
