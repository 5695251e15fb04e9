"""Info several-runtime-copies: two copies of the CUDA runtime initialised on one primary context.

CuPy's runtime (linked into CuPy) and cuda.bindings' runtime (linked into cuda.bindings) each retain
the primary context at their first call on the device (lab claim refcount.reference-per-runtime-copy).
Not an error by itself: a cudaDeviceReset through one copy destroys the context under the other.

    ctxlab audit -- examples/hazards/several_runtime_copies.py
"""

import cupy
from cuda.bindings import runtime


def main() -> int:
    cupy.cuda.runtime.setDevice(0)  # CuPy's copy of the runtime
    cupy.cuda.runtime.free(0)
    statuses = (runtime.cudaSetDevice(0)[0].name, runtime.cudaFree(0)[0].name)  # HAZARD: a second copy
    print(f"cuda.bindings runtime: cudaSetDevice {statuses[0]}, cudaFree(0) {statuses[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
