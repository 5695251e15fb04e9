"""Clean: task threads that push the retained primary context in try/finally and pop it before they end.

A task-based application has no main thread that owns the GPU. Each task retains the primary context,
pushes it, does its driver-API work, and pops and releases it in a finally block, so every thread ends
with an empty context stack and every retain has its release. The main thread holds one reference of
its own for the whole run.

Report: https://github.com/inducer/pycuda/issues/305 -- with no main thread to own the context, tasks push
and pop the primary context around their work; a wrapper guarantees the pop (and that GPU objects are
out of scope before it).

Expected findings: none (no error, no warning).

    ctxlab audit -- examples/realworld/clean_driver_primary_push_pop_threads.py
"""

import os
import sys
import threading

import numpy as np
from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

N = 1 << 14


def task(dev, value: int, out: dict) -> None:
    primary = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    try:
        buf = check(driver.cuMemAlloc(4 * N), "cuMemAlloc")
        check(driver.cuMemsetD32(buf, value, N), "cuMemsetD32")
        host = np.empty(N, dtype=np.uint32)
        check(driver.cuMemcpyDtoH(host.ctypes.data, buf, 4 * N), "cuMemcpyDtoH")
        check(driver.cuMemFree(buf), "cuMemFree")
        out[value] = int(host.sum())
    finally:
        check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
        check(driver.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease")


def main() -> int:
    dev = device(0)
    check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")  # the run's own reference
    out: dict = {}
    tasks = [threading.Thread(target=task, args=(dev, v, out), name=f"task-{v}") for v in (1, 2, 3, 4)]
    for t in tasks:
        t.start()
    for t in tasks:
        t.join()
    check(driver.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease")
    print(f"tasks {dict(sorted(out.items()))}; all right: {all(out[v] == v * N for v in out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
