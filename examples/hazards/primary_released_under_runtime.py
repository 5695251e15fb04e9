"""Hazard primary-released-under-runtime: cuDevicePrimaryCtxRelease takes the count to zero under CuPy.

CuPy's runtime uses and retains the primary context. The program releases it from the driver API,
references it never took, until the driver refuses: the release that takes the count to zero
destroys the context while CuPy still holds an array in it; CuPy's next reduction fails (lab claims
refcount.primary-count, refcount.after-last-release).

    ctxlab audit -- examples/hazards/primary_released_under_runtime.py
"""

import os
import sys

import cupy
from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _cuda import device  # noqa: E402


def main() -> int:
    cupy.cuda.runtime.setDevice(0)
    a = cupy.arange(1000, dtype=cupy.int64)
    print(f"sum before: {int(a.sum())}")
    dev = device(0)
    released = []
    for _ in range(8):
        (err,) = driver.cuDevicePrimaryCtxRelease(dev)  # HAZARD: releases references the runtime holds
        released.append(err.name)
        if int(err):
            break
    print(f"releases: {', '.join(released)}")
    try:
        print(f"sum after: {int(a.sum())}")
    except Exception as exc:  # the runtime's context is gone
        print(f"sum after: {type(exc).__name__}: {exc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
