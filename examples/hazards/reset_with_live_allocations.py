"""Hazard reset-with-live-allocations: cudaDeviceReset while CuPy's array is still in use.

CuPy allocates and runs a kernel; cuda.bindings' runtime (CuPy does not wrap cudaDeviceReset) resets
the device; CuPy's next use of the old array fails (lab claim refcount.device-reset-destroys).

    ctxlab audit -- examples/hazards/reset_with_live_allocations.py
"""

import cupy
from cuda.bindings import runtime


def main() -> int:
    cupy.cuda.runtime.setDevice(0)
    a = cupy.arange(1000, dtype=cupy.int64) * 3 + 1
    print(f"sum before: {int(a.sum())}")
    runtime.cudaSetDevice(0)
    (err,) = runtime.cudaDeviceReset()  # HAZARD: destroys the array CuPy still holds
    print(f"cudaDeviceReset: {err.name}")
    try:
        print(f"sum after: {int(a.sum())}")
    except Exception as exc:
        print(f"sum after: {type(exc).__name__}: {exc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
