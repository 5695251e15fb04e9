"""Hazard cross-context-handle: CuPy's cached kernel launched under another context.

A CuPy expression is compiled and loaded in the primary context; after cuCtxCreate makes a second
context current, the same expression launches the kernel CuPy cached per device, which belongs to
the primary context: CUDA_ERROR_INVALID_HANDLE (lab claims migrate.cupy-kernel-cache-across-contexts,
modules.cupy-kernel-cache). The error is not caught: the program fails with CuPy's exception, and the
audit reports the line that raised it.

    ctxlab audit -- examples/hazards/cross_context_handle.py
"""

import os
import sys

import cupy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _cuda import create_context, device  # noqa: E402


def main() -> int:
    cupy.cuda.runtime.setDevice(0)
    first = float(cupy.sqrt(cupy.arange(64, dtype=cupy.float64) * 3.5 + 1.25).sum())
    print(f"in the primary context: {first:.3f}")
    create_context(device(0))  # a second context, current on this thread now
    second = float(cupy.sqrt(cupy.arange(64, dtype=cupy.float64) * 3.5 + 1.25).sum())  # HAZARD
    print(f"in the created context: {second:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
