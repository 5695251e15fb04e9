"""Hazard pointer-from-another-context: CuPy's pool memory of the primary context given to a kernel
launched under a cuCtxCreate context.

CuPy allocates an array in the primary context (its per-device memory pool); after cuCtxCreate makes a
second context current, a CuPy expression not used before is compiled and loaded there, and its kernel
is launched there with the first array as an argument. On the H200 the kernel reads it correctly (lab
claim migrate.own-address-space: a kernel in one context read another's memory), but the memory belongs
to the primary context: a reset of it, or CuPy's pool handing the block out again, would pull it from
under the second context (migrate.cupy-pool-across-contexts). The audit reports a warning, so it exits 0.

    ctxlab audit -- examples/hazards/pointer_from_another_context.py
"""

import os
import sys

import cupy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _cuda import create_context, device  # noqa: E402


def main() -> int:
    cupy.cuda.runtime.setDevice(0)
    a = cupy.arange(4096, dtype=cupy.float32)  # ALLOCATED: memory of the primary context (CuPy's pool)
    cupy.cuda.runtime.deviceSynchronize()
    create_context(device(0))  # a second context, current on this thread now
    b = a * 2.5  # HAZARD: a new kernel, loaded and launched in the second context, reads the primary's memory
    host = cupy.asnumpy(b)
    print(f"a * 2.5 computed under the created context: b[4095] = {host[4095]:.1f} (expected {4095 * 2.5:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
