"""A result grid whose __del__ frees device memory after the search object destroyed its context.

The grid search owns a context (cuCtxCreate) and allocates its result grid in it. Its close() destroys
the context. The grid object is still referenced by the caller's local variable, so it is collected only
when the caller returns, after close(): its __del__ frees memory of a destroyed context and gets an
error status, which it records (an exception in __del__ would only be printed as ignored).

Report: https://github.com/PyFstat/PyFstat/issues/411 -- a custom __del__ that cleans up pycuda
resources fails with "cuCtxGetDevice failed: invalid device context" once another function call wraps
the search: garbage collection runs the cleanup after the context is gone.

Expected finding: used-after-teardown on thread MainThread, at the line marked HAZARD in
DeviceGrid.__del__() (the cuMemFree after the cuCtxDestroy marked TEARDOWN).

    ctxlab audit -- examples/realworld/teardown_del_after_ctx_destroy.py
"""

import os
import sys

import numpy as np
from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

FREES: list = []


class DeviceGrid:
    def __init__(self, n: int) -> None:
        self.n = n
        self.ptr = check(driver.cuMemAlloc(4 * n), "cuMemAlloc")

    def __del__(self) -> None:
        (err,) = driver.cuMemFree(self.ptr)  # HAZARD: used-after-teardown
        FREES.append(err.name)


class GridSearch:
    def __init__(self) -> None:
        self.ctx = check(driver.cuCtxCreate(None, 0, device(0)), "cuCtxCreate")

    def run(self, grid: DeviceGrid) -> int:
        check(driver.cuMemsetD32(grid.ptr, 3, grid.n), "cuMemsetD32")
        host = np.empty(grid.n, dtype=np.uint32)
        check(driver.cuMemcpyDtoH(host.ctypes.data, grid.ptr, 4 * grid.n), "cuMemcpyDtoH")
        return int(host.sum())

    def close(self) -> None:
        check(driver.cuCtxDestroy(self.ctx), "cuCtxDestroy")  # TEARDOWN


def transient_search() -> int:
    search = GridSearch()
    grid = DeviceGrid(1 << 16)
    total = search.run(grid)
    search.close()
    return total  # `grid` is collected here, after close()


def main() -> int:
    total = transient_search()
    print(f"search result {total}; the grid's __del__ freed its memory with status {FREES}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
