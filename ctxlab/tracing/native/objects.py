"""Which shared object a native return address lies in: names the copy of the CUDA runtime that made a call.

The C callback keeps the return addresses of a primary-context retain (``WANT_CALLERS``); they are resolved
here, in Python, after the call (``dladdr`` takes the loader's lock, which the callback must not).
"""

from __future__ import annotations

import ctypes
import os
import struct

# Objects between the callback and the code that called CUDA: the driver, CUPTI, ctxlab's own callback, the C
# and unwinding libraries. The first object past them is the caller (for a retain, the runtime copy).
_PASSING = ("libcuda.so", "libcupti.so", "cupti_shim-", "libc.so", "libgcc_s.so", "ld-linux", "libpthread.so")


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


_dladdr = None


def _resolver():
    global _dladdr
    if _dladdr is None:
        function = ctypes.CDLL(None).dladdr
        function.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        function.restype = ctypes.c_int
        _dladdr = function
    return _dladdr


def object_of(address: int) -> str | None:
    """The path of the shared object (or executable) holding ``address``, or None."""
    info = _DlInfo()
    if not address or not _resolver()(ctypes.c_void_p(address), ctypes.byref(info)) or not info.dli_fname:
        return None
    return os.fsdecode(info.dli_fname)


def addresses(blob: bytes) -> list[int]:
    """The return addresses in a callers item (head: item id, byte length; then 8 bytes each)."""
    if len(blob) < 8:
        return []
    _item, size = struct.unpack_from("<II", blob)
    body = blob[8:8 + size]
    return [value for (value,) in struct.iter_unpack("<Q", body[: len(body) // 8 * 8])]


def callers(blob: bytes) -> list[str]:
    """The shared objects of a call's native stack, innermost first, each once, without those between the
    callback and the caller (the driver, CUPTI, ctxlab's callback, the C library)."""
    seen: list[str] = []
    for address in addresses(blob):
        path = object_of(address)
        if path and not passing(path) and path not in seen:
            seen.append(path)
    return seen


def passing(path: str) -> bool:
    """Whether a shared object lies between the callback and the caller (the driver, CUPTI, libc...)."""
    name = os.path.basename(path)
    return any(name.startswith(prefix) for prefix in _PASSING)


def library_name(path: str) -> str:
    """A shared object as a reader knows it: its path below site-packages (``cupy_backends/cuda/api/...so``,
    ``nvidia/cuda_runtime/lib/libcudart.so.13``), else its file name (``libcudart.so.13``)."""
    parts = path.replace("\\", "/").split("/")
    for marker in ("site-packages", "dist-packages"):
        if marker in parts[:-1]:
            return "/".join(parts[parts.index(marker) + 1:])
    return parts[-1]
