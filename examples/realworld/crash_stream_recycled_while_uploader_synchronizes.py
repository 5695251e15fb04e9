"""A stream pool that destroys a lent stream it thinks idle while the uploader thread still synchronises it.

A data-loading service keeps a pool of streams (driver API, primary context) and lends one to each upload
thread. A housekeeping pass on MainThread "recycles" streams that look idle: it destroys every stream
with no work queued (cuStreamQuery returns CUDA_SUCCESS), lent or not. The uploader has queued its copy,
and the copy has finished, so its stream looks idle and is destroyed; then the uploader, about to hand
the batch on, synchronises the stream it still holds. A destroyed stream's handle points at memory the
driver has freed; on the H200 (driver 580.159) cuStreamSynchronize on it does not return an error: it
crashes inside the driver, SIGSEGV on thread uploader.

Report: https://github.com/rapidsai/rmm/issues/932 -- CUDA_STREAM_TEST segfaults in a release build: a stream
handle is used (destroyed again) after cudaStreamDestroy; the maintainer: it "should cause a CUDA error, not
a segfault".

Expected finding: program-crashed on thread uploader, at the line marked HAZARD in upload() (the
cuStreamSynchronize of the destroyed stream; the pool's destroy on MainThread is the line marked DESTROY in
StreamPool.recycle_idle()). Ends by SIGSEGV.

    ctxlab audit -- examples/realworld/crash_stream_recycled_while_uploader_synchronizes.py
"""

import os
import sys
import threading

from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

N = 1 << 20  # 32-bit words per batch
NON_BLOCKING = int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)


class StreamPool:
    def __init__(self, size: int) -> None:
        self.streams = [check(driver.cuStreamCreate(NON_BLOCKING), "cuStreamCreate") for _ in range(size)]

    def lend(self, i: int):
        return self.streams[i]

    def recycle_idle(self) -> int:
        kept, recycled = [], 0
        for stream in self.streams:
            (status,) = driver.cuStreamQuery(stream)
            if int(status) == 0:  # nothing queued: looks idle
                check(driver.cuStreamDestroy(stream), "cuStreamDestroy")  # DESTROY: lent or not
                recycled += 1
            else:
                kept.append(stream)
        self.streams = kept
        return recycled


def upload(primary, stream, queued: threading.Event, recycled: threading.Event) -> None:
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    try:
        buf = check(driver.cuMemAlloc(4 * N), "cuMemAlloc")
        check(driver.cuMemsetD32Async(buf, 0x5A, N, stream), "cuMemsetD32Async")
        queued.set()
        recycled.wait(60)  # the uploader is preempted here; the pool's housekeeping runs
        (err,) = driver.cuStreamSynchronize(stream)  # HAZARD: program-crashed
        print(f"uploader: cuStreamSynchronize: {err.name} (not expected: the call crashes)", flush=True)
        check(driver.cuMemFree(buf), "cuMemFree")
    finally:
        check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")


def main() -> int:
    dev = device(0)
    primary = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    pool = StreamPool(2)
    queued, recycled = threading.Event(), threading.Event()
    lent = pool.lend(0)
    uploader = threading.Thread(target=upload, args=(primary, lent, queued, recycled), name="uploader")
    uploader.start()
    queued.wait(60)
    check(driver.cuCtxSynchronize(), "cuCtxSynchronize")  # the copy finishes: the lent stream looks idle
    print(f"housekeeping: recycled {pool.recycle_idle()} idle stream(s), the lent one among them", flush=True)
    recycled.set()
    uploader.join()
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    check(driver.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
