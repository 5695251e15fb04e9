"""Where the functions the C callback calls are: a library this process loaded (CUPTI's), and the driver's
cuFuncGetParamInfo and cuFuncGetName."""

from __future__ import annotations

import ctypes
import os


def address(function) -> int:
    """The address of a ctypes function (to hand to the C side)."""
    return int(ctypes.cast(function, ctypes.c_void_p).value or 0)


def loaded_library(fragment: str) -> str | None:
    """The path of a shared library this process has loaded whose file name contains ``fragment``."""
    try:
        with open("/proc/self/maps") as handle:
            for line in handle:
                path = line.rstrip("\n").split(maxsplit=5)[-1]
                if fragment in os.path.basename(path) and path.startswith("/"):
                    return path
    except OSError:
        pass
    return None


def driver_function_address(name: str, version: int) -> int:
    """The address of a driver function (only its address: the C callback calls it), 0 where there is none.
    Taken from cuda.bindings' cuGetProcAddress, else from the driver library's symbol."""
    try:
        from cuda.bindings import driver

        for symbol in (name, name.encode()):
            try:  # flags 0: CU_GET_PROC_ADDRESS_DEFAULT
                err, pfn, _status = driver.cuGetProcAddress(symbol, version, 0)
            except TypeError:
                continue
            if int(err) == 0 and int(pfn):
                return int(pfn)
    except Exception:
        pass
    try:
        path = loaded_library("libcuda.so") or "libcuda.so.1"
        return address(getattr(ctypes.CDLL(path), name))
    except (OSError, AttributeError):
        return 0


def param_info_address() -> int:
    """cuFuncGetParamInfo's address (CUDA 12.4+), for the launch arguments; 0 where there is none."""
    return driver_function_address("cuFuncGetParamInfo", 12040)


def function_name_address() -> int:
    """cuFuncGetName's address (CUDA 12.3+), for the kernels' names; 0 where there is none."""
    return driver_function_address("cuFuncGetName", 12030)
