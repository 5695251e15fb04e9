"""A solver wrapper that frees a buffer it only borrowed, and the owner's copy from that buffer afterwards.

The application owns a device buffer with its matrix values. A solver library wraps the buffer without
copying it (its matrix object aliases the application's pointer), sets it up on a solver thread, and at
the end destroys its matrix object, whose destroy() frees the values as if it owned them. Back on the main
thread the application copies its values to the host: the memory is gone, and cuMemcpyDtoH from the freed
pointer fails (CUDA_ERROR_INVALID_VALUE, "invalid argument", is what the driver is expected to answer; the
program prints the status). The buffer is 64 MiB, an allocation of its own that the driver unmaps when it
is freed. The application treats the buffer as lost and does not free it again.

Report: https://github.com/hypre-space/hypre/pull/1362 -- hypre aliases the memory of a PETSc matrix and
frees it on destroy although it does not own it; PETSc's later cudaMemcpy from that matrix fails with
"invalid argument" because the device pointer was freed.

Expected finding: freed-memory-used on thread MainThread, at the line marked HAZARD in main() (the
cuMemcpyDtoH from the buffer the solver thread freed).

    ctxlab audit -- examples/realworld/freed_copy_from_buffer_solver_freed.py
"""

import os
import sys
import threading

import numpy as np
from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

N = 16 << 20  # 16 Mi uint32 values: 64 MiB


class SolverMatrix:
    """The library's matrix: it aliases the caller's values instead of copying them."""

    def __init__(self, values, n: int) -> None:
        self.values, self.n = values, n

    def setup(self) -> None:
        check(driver.cuMemsetD32(self.values, 2, self.n), "cuMemsetD32")  # prepares the values in place

    def destroy(self) -> None:
        check(driver.cuMemFree(self.values), "cuMemFree")  # frees memory it does not own


def solve(dev, values, out: dict) -> None:
    primary = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    try:
        matrix = SolverMatrix(values, N)
        matrix.setup()
        check(driver.cuCtxSynchronize(), "cuCtxSynchronize")
        matrix.destroy()
        out["solver"] = "done"
    finally:
        check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
        check(driver.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease")


def main() -> int:
    dev = device(0)
    primary = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    values = check(driver.cuMemAlloc(4 * N), "cuMemAlloc")
    check(driver.cuMemsetD32(values, 1, N), "cuMemsetD32")
    out: dict = {}
    solver = threading.Thread(target=solve, args=(dev, values, out), name="solver")
    solver.start()
    solver.join()
    host = np.zeros(N, dtype=np.uint32)
    (err,) = driver.cuMemcpyDtoH(host.ctypes.data, values, 4 * N)  # HAZARD: freed-memory-used
    copied = err.name
    # the buffer is lost: it is not freed again here
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    check(driver.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease")
    print(f"solver: {out.get('solver')}; the application's cuMemcpyDtoH of its values afterwards: {copied}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
