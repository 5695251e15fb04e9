"""A request timer whose start event lives in the primary context and whose end event in a worker context.

The service records a "request start" event in the primary context when a request arrives. The request
runs in an engine context of its own (cuCtxCreate), where the "request end" event is created and
recorded. cuEventElapsedTime needs both events from one context: it returns CUDA_ERROR_INVALID_HANDLE.

Report: https://github.com/intel/llvm/pull/8312 -- events are tied to their context; cuEventElapsedTime
with two events created in separate contexts returns CUDA_ERROR_INVALID_HANDLE.

Expected finding: handle-from-another-context on thread request-timer, at the line marked HAZARD in
serve() (the cuEventElapsedTime; the program catches the status and prints it).

    ctxlab audit -- examples/realworld/handle_event_elapsed_two_contexts.py
"""

import os
import sys
import threading

from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

N = 1 << 20


def serve(dev, out: dict) -> None:
    primary = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    start = check(driver.cuEventCreate(int(driver.CUevent_flags.CU_EVENT_DEFAULT)), "cuEventCreate")
    check(driver.cuEventRecord(start, driver.CUstream(0)), "cuEventRecord")
    check(driver.cuEventSynchronize(start), "cuEventSynchronize")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    engine = check(driver.cuCtxCreate(None, 0, dev), "cuCtxCreate")  # the request's engine context
    work = check(driver.cuMemAlloc(4 * N), "cuMemAlloc")
    check(driver.cuMemsetD32(work, 1, N), "cuMemsetD32")
    end = check(driver.cuEventCreate(int(driver.CUevent_flags.CU_EVENT_DEFAULT)), "cuEventCreate")
    check(driver.cuEventRecord(end, driver.CUstream(0)), "cuEventRecord")
    check(driver.cuEventSynchronize(end), "cuEventSynchronize")
    err, ms = driver.cuEventElapsedTime(start, end)  # HAZARD: handle-from-another-context
    out["elapsed"] = err.name if int(err) else f"{ms:.3f} ms"
    check(driver.cuEventDestroy(end), "cuEventDestroy")
    check(driver.cuMemFree(work), "cuMemFree")
    check(driver.cuCtxDestroy(engine), "cuCtxDestroy")
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    check(driver.cuEventDestroy(start), "cuEventDestroy")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    check(driver.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease")


def main() -> int:
    out: dict = {}
    timer = threading.Thread(target=serve, args=(device(0), out), name="request-timer")
    timer.start()
    timer.join()
    print(f"cuEventElapsedTime(start in the primary context, end in the engine context): {out['elapsed']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
