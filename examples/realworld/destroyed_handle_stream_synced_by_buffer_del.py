"""A device buffer whose release synchronises its stream after the aligner destroyed that stream.

The aligner creates a stream for a batch and a device buffer bound to it: the buffer synchronises its
stream before it frees its memory, so that no queued work still uses it. At the end of the batch the
aligner destroys the stream by hand; the buffer is a local object and is released only afterwards, when
the function returns, so its __del__ synchronises a stream that no longer exists. The driver is expected
to refuse the destroyed handle (CUDA_ERROR_INVALID_HANDLE, or CUDA_ERROR_CONTEXT_IS_DESTROYED as the
report saw); the program prints what comes back. No stream is created between the destroy and the use,
so the handle cannot have been handed out again.

Report: https://github.com/NVIDIA-Genomics-Research/GenomeWorks/issues/393 -- a buffer from the
pre-allocated allocator is destroyed automatically at the end of its scope, after its stream was
destroyed with a manual cudaStreamDestroy, so its deallocation calls cudaStreamSynchronize on a freed
stream handle and fails (cudaErrorContextIsDestroyed or similar).

Expected finding: program-crashed on thread aligner, at the line marked HAZARD in StreamBuffer.__del__()
(the cuStreamSynchronize of the stream destroyed at the line marked DESTROY), naming the destroyed stream.
Changed after the first audit on the H200 (driver 580.159): the header first expected handle-destroyed, a
refused handle; there the synchronisation of the destroyed stream segfaults inside the driver (SIGSEGV), so
the call never returns. The crash's finding names the stream the call was inside and where it was destroyed.
Changed again after the first wave-5 audit on an H100 (driver 580.159): there the same call returned
CUDA_ERROR_INVALID_CONTEXT instead. What the driver does with a destroyed stream's handle is undefined, so
either outcome is expected: the crash above, or handle-destroyed at the same line, its because the destroy
at the line marked CAUSE, the program then ending normally.

    ctxlab audit -- examples/realworld/destroyed_handle_stream_synced_by_buffer_del.py
"""

import os
import sys
import threading

import numpy as np
from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

N = 1 << 18
RELEASES: dict = {}


class StreamBuffer:
    """Device memory used on one stream; it waits for the stream before freeing."""

    def __init__(self, n: int, stream) -> None:
        self.n, self.stream = n, stream
        self.ptr = check(driver.cuMemAlloc(4 * n), "cuMemAlloc")

    def __del__(self) -> None:
        (err,) = driver.cuStreamSynchronize(self.stream)  # HAZARD: program-crashed  # HAZARD: handle-destroyed
        RELEASES["sync"] = err.name
        (err,) = driver.cuMemFree(self.ptr)
        RELEASES["free"] = err.name


def align_batch(n: int) -> int:
    stream = check(driver.cuStreamCreate(int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)), "cuStreamCreate")
    scores = StreamBuffer(n, stream)
    check(driver.cuMemsetD32Async(scores.ptr, 7, n, stream), "cuMemsetD32Async")
    check(driver.cuStreamSynchronize(stream), "cuStreamSynchronize")
    host = np.empty(n, dtype=np.uint32)
    check(driver.cuMemcpyDtoH(host.ctypes.data, scores.ptr, host.nbytes), "cuMemcpyDtoH")
    check(driver.cuStreamDestroy(stream), "cuStreamDestroy")  # DESTROY  # CAUSE: handle-destroyed
    return int(host.sum())  # `scores` is released when this returns, after its stream is gone


def aligner(dev, out: dict) -> None:
    primary = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    try:
        out["total"] = align_batch(N)
    finally:
        check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
        check(driver.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease")


def main() -> int:
    dev = device(0)
    out: dict = {}
    worker = threading.Thread(target=aligner, args=(dev, out), name="aligner")
    worker.start()
    worker.join()
    print(f"batch total {out.get('total')} (expected {7 * N}); the buffer's release: "
          f"cuStreamSynchronize of the destroyed stream {RELEASES.get('sync')}, cuMemFree {RELEASES.get('free')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
