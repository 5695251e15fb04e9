"""ctxlab's CUPTI callback in C (``cupti_shim.c``): built on first use, loaded with ctypes.

The callback runs inside the driver on the program's threads, so it must never wait for the GIL (see the
source's header). It has no Python ABI and needs neither CUDA's nor Python's headers: one build serves any
Python; it is compiled with the system C compiler (``$CC`` or ``cc``) into ctxlab's cache folder
(``$CTXLAB_CACHE``, else ``$XDG_CACHE_HOME/ctxlab``, else ``~/.cache/ctxlab``), keyed by the source's hash.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading

from ctxlab.tracing.fields import ENTER as ENTER  # the callback sites, as the field specs name them
from ctxlab.tracing.fields import EXIT as EXIT
from ctxlab.tracing.native.locate import address

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cupti_shim.c")
ABI_VERSION = 7

# One record per call or resource event; mirrors record_t in cupti_shim.c. numpy's dtype of it is made when
# first asked for (``RECORD_DTYPE``): importing numpy costs a lab's --help about 90 ms, and --help needs no record.
RECORD_FIELDS = [("start", "<u8"), ("end", "<u8"), ("context", "<u8"), ("a", "<u8"), ("b", "<u8"), ("c", "<u8"),
                 ("d", "<u8"), ("e", "<u8"),
                 ("tid", "<u4"), ("cbid", "<u4"), ("correlation", "<u4"), ("context_uid", "<u4"), ("status", "<i4"),
                 ("stack", "<u4"), ("blob", "<u4"), ("blob_len", "<u4"), ("domain", "<u2"), ("flags", "<u2"),
                 ("depth", "<u4")]


def __getattr__(name: str):
    if name == "RECORD_DTYPE":
        import numpy

        dtype = numpy.dtype(RECORD_FIELDS)
        globals()["RECORD_DTYPE"] = dtype
        return dtype
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


DOMAIN_DRIVER, DOMAIN_RUNTIME, DOMAIN_RESOURCE = 1, 2, 3
NESTED_IN_RUNTIME, NO_EXIT, BLOB_DROPPED = 1, 2, 4
WANT_STACK, WANT_LAUNCH, WANT_MODULE, WANT_CALLERS, WANT_NAME = 1, 2, 8, 16, 32
CALLERS_ITEM = 0xFFFFFFFE  # an argument-store item holding native return addresses (cupti_shim.c)
# What became of a stack (cupti_shim.c's S_* values), and what a report says where there is none.
STACK_NATIVE, STACK_PENDING, STACK_SERVED, STACK_ABANDONED, STACK_NO_PYTHON, STACK_NO_HELPER = 1, 2, 3, 4, 5, 6
STACK_REASONS = {
    STACK_PENDING: "the call was still in progress when tracing stopped",
    STACK_ABANDONED: "the thread had released the GIL and another thread held it for longer than the tracer "
                     "waits (its stack could not be taken without risking a deadlock)",
    STACK_NO_PYTHON: "the call was made by a thread Python did not start (no Python stack)",
    STACK_NO_HELPER: "the call was made while ctxlab's stack thread was not running (interpreter shutdown or a "
                     "forked child)",
}
MAX_FRAMES = 48
COUNT_NAMES = ("stacks", "stacks_walked_with_gil", "stack_requests", "stacks_served", "stacks_abandoned",
               "launch_arguments_dropped", "records_pending", "argument_bytes", "stacks_read_in_place")


class NativeUnavailable(RuntimeError):
    """The C callback cannot be built or loaded here (no C compiler, or it failed)."""


_lock = threading.Lock()
_lib: ctypes.CDLL | None = None


def cache_dir() -> str:
    """Where built libraries are kept."""
    explicit = os.environ.get("CTXLAB_CACHE")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ctxlab")


def _source_hash() -> str:
    with open(SOURCE, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()[:16]


def build(directory: str | None = None) -> str:
    """The path of the built library, compiling it first if this source was never built there."""
    directory = directory or cache_dir()
    target = os.path.join(directory, f"cupti_shim-{_source_hash()}-{os.uname().machine}.so")
    if os.path.exists(target):
        return target
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not compiler:
        raise NativeUnavailable("no C compiler found (set CC, or install gcc): ctxlab's CUPTI callback is built "
                                "from C on first use")
    try:
        os.makedirs(directory, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=".cupti_shim.", suffix=".so", dir=directory)
    except OSError as exc:
        raise NativeUnavailable(f"cannot write ctxlab's cache folder {directory}: {exc.strerror}") from None
    os.close(fd)
    try:
        done = subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-pthread", "-o", temp, SOURCE],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            first = next((line for line in done.stderr.splitlines() if "error" in line), done.stderr.strip()[:200])
            raise NativeUnavailable(f"building ctxlab's CUPTI callback with {compiler} failed: {first}")
        os.replace(temp, target)  # another process may have built it at the same time: either copy is right
    finally:
        if os.path.exists(temp):
            os.unlink(temp)
    return target


def load() -> ctypes.CDLL:
    """The loaded library (built first where needed), with its functions' types declared."""
    global _lib
    with _lock:
        if _lib is None:
            lib = ctypes.CDLL(build())
            _declare(lib)
            if lib.ctxlab_abi() != ABI_VERSION or lib.ctxlab_record_size() != __getattr__("RECORD_DTYPE").itemsize:
                raise NativeUnavailable("ctxlab's CUPTI callback does not match this ctxlab (clear its cache "
                                        f"folder {cache_dir()})")
            _lib = lib
        return _lib


def _declare(lib: ctypes.CDLL) -> None:
    u32, u64, vp, size, i32 = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
    signatures = {
        "ctxlab_abi": (i32, []), "ctxlab_recorded_any": (i32, []), "ctxlab_record_size": (size, []),
        "ctxlab_stack_size": (size, []),
        "ctxlab_init": (None, [vp] * 12 + [i32]),
        "ctxlab_set_want": (None, [u32, u32, u32]),
        "ctxlab_set_field": (None, [u32] * 7),
        "ctxlab_set_launch": (None, [u32, i32, i32, i32]),
        "ctxlab_set_active": (None, [i32]), "ctxlab_set_failure_stacks": (None, [i32]),
        "ctxlab_set_helper": (None, [i32]),
        "ctxlab_take_records": (size, [vp, size]), "ctxlab_pending_records": (size, []),
        "ctxlab_stack": (u32, [u32, ctypes.POINTER(u64), ctypes.POINTER(u32), ctypes.POINTER(u32)]),
        "ctxlab_blob": (size, [u32, u32, vp]),
        "ctxlab_counts": (None, [ctypes.POINTER(u64)]),
        "ctxlab_reset": (None, []),
        "ctxlab_next_request": (u32, [i32, ctypes.POINTER(u32)]),
        "ctxlab_served": (i32, [u32]),
        "ctxlab_callback": (None, [vp, u32, u32, vp]),
        "ctxlab_test_call_holding_lock": (None, [u32, u32, vp, vp, i32]),
        "ctxlab_test_repeat": (None, [u32, u32, vp, vp, ctypes.c_uint64]),
        "ctxlab_test_call_other_holding_lock": (None, [vp, u32, u32, vp, vp, i32]),
        "ctxlab_test_take_lock": (None, []),
        "ctxlab_flight_open": (i32, [ctypes.c_char_p, u64, u64, u64]),
        "ctxlab_flight_thread": (None, [u32, u64, ctypes.c_char_p, u32]),
        "ctxlab_flight_thread_end": (None, [u32]),
        "ctxlab_flight_clock": (None, [u64]),
        "ctxlab_flight_close": (None, []),
        "ctxlab_store_text": (None, [u32, u32, ctypes.c_char_p, u32]),
        "ctxlab_set_names": (None, [vp, vp, vp, vp]),
        "ctxlab_set_launch_function": (None, [u32, i32]),
        "ctxlab_read_frames_in_place": (i32, [ctypes.POINTER(ctypes.c_int32), vp, vp, vp, i32, vp]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes


def python_api() -> list[int]:
    """The CPython functions the C side walks a thread's frames with while that thread holds the GIL (and
    keeps the collector off meanwhile: a collection could run finalizers, Python code, inside the driver)."""
    api = ctypes.pythonapi
    names = ("PyGILState_Check", "PyGILState_GetThisThreadState", "PyThreadState_GetFrame", "PyFrame_GetBack",
             "PyFrame_GetCode", "PyFrame_GetLineNumber", "Py_DecRef", "PyGC_Disable", "PyGC_Enable")
    return [address(getattr(api, name)) for name in names]


def naming_api() -> list[int]:
    """The CPython functions the flight recorder names code objects with, while the thread holds the GIL."""
    api = ctypes.pythonapi
    return [address(getattr(api, name)) for name in ("PyObject_GetAttrString", "PyUnicode_AsUTF8AndSize",
                                                     "PyErr_Clear")]


def counts(lib: ctypes.CDLL) -> dict[str, int]:
    """The C side's counters (stacks taken, waited for, abandoned; arguments dropped)."""
    out = (ctypes.c_uint64 * len(COUNT_NAMES))()
    lib.ctxlab_counts(out)
    return dict(zip(COUNT_NAMES, (int(v) for v in out), strict=True))


def take_records(lib: ctypes.CDLL):
    """Every record written so far, moved out of the C side (a numpy array of ``RECORD_DTYPE``)."""
    import numpy

    dtype = __getattr__("RECORD_DTYPE")
    chunks = []
    while True:
        n = lib.ctxlab_pending_records()
        if not n:
            break
        block = numpy.zeros(n, dtype=dtype)
        got = lib.ctxlab_take_records(block.ctypes.data, n)
        chunks.append(block[:got])
        if got < n:
            break
    return numpy.concatenate(chunks) if chunks else numpy.zeros(0, dtype=dtype)


def stack_frames(lib: ctypes.CDLL, stack_id: int) -> tuple[int, list[tuple[int, int]], int]:
    """(state, [(code object address, line)], thread id) of a stack."""
    buf = (ctypes.c_uint64 * (2 * MAX_FRAMES))()
    n, tid = ctypes.c_uint32(0), ctypes.c_uint32(0)
    state = int(lib.ctxlab_stack(stack_id, buf, ctypes.byref(n), ctypes.byref(tid)))
    frames = [(int(buf[2 * i]), int(buf[2 * i + 1])) for i in range(n.value)] if state == STACK_NATIVE else []
    return state, frames, int(tid.value)


def blob(lib: ctypes.CDLL, at: int, length: int) -> bytes:
    """Bytes the C side kept (a launch's arguments)."""
    buf = ctypes.create_string_buffer(length)
    got = lib.ctxlab_blob(at, length, buf)
    return buf.raw[:got]
