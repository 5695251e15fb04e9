"""A worker that pushes an engine context made by another library and hands its buffer to Numba there.

A columnar-data library (pyarrow.cuda-like) makes its own context with cuCtxCreate and gives the worker
the context and a device buffer. The worker pushes the context, as that library's docs say, and wraps
the result with Numba to post-process it: Numba finds a non-primary context current and refuses ("Numba
cannot operate on non-primary CUDA context"). The program catches the error.

Report: https://github.com/numba/numba/issues/3410 -- numba.cuda on device memory whose context was made by
pyarrow.cuda fails (CUDA_ERROR_INVALID_HANDLE from cuLaunchKernel); Numba works on the primary context.

Expected findings: non-primary-current on thread arrow-worker, at the line marked HAZARD in work() (Numba's
attach while the library's context is current); failed-call on the same thread at the pop marked HAZARD
failed-call. The second was added after the wave-4 audit, which reports every failing call: on the H200 the
worker's own cuCtxPopCurrent in finally returns CUDA_ERROR_INVALID_CONTEXT, with no context left current on the
thread after Numba's refused attach, a failure the program's check() raises in its finally block.

    ctxlab audit -- examples/realworld/nonprimary_numba_in_engine_worker.py
"""

import os
import sys
import threading

import numpy as np
from cuda.bindings import driver
from numba import cuda

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

N = 4096


def work(lib_ctx, buffer, out: dict) -> None:
    check(driver.cuCtxPushCurrent(lib_ctx), "cuCtxPushCurrent")
    try:
        check(driver.cuMemsetD32(buffer, 42, N), "cuMemsetD32")
        column = cuda.to_device(np.zeros(N, dtype=np.uint32))  # HAZARD: non-primary-current
        out["numba"] = f"copied {column.size} values"
    except Exception as exc:
        out["numba"] = f"{type(exc).__name__}: {exc}"
    finally:
        check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")  # HAZARD: failed-call


def main() -> int:
    lib_ctx = check(driver.cuCtxCreate(None, 0, device(0)), "cuCtxCreate")  # the library's own context
    buffer = check(driver.cuMemAlloc(4 * N), "cuMemAlloc")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    out: dict = {}
    worker = threading.Thread(target=work, args=(lib_ctx, buffer, out), name="arrow-worker")
    worker.start()
    worker.join()
    check(driver.cuCtxPushCurrent(lib_ctx), "cuCtxPushCurrent")
    check(driver.cuMemFree(buffer), "cuMemFree")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    check(driver.cuCtxDestroy(lib_ctx), "cuCtxDestroy")
    print(f"Numba under the library's context on arrow-worker: {out['numba']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
