"""Clean: a staging buffer whose release frees it once and clears its pointer, so a second release does nothing.

The same hand-over as the double-free program: the main thread allocates a staging buffer, the uploader
thread copies a batch through it into the model's input buffer and releases it when done, and the main
thread's cleanup releases it too. Here the buffer is an object whose release() takes the pointer under a
lock and sets it to None before it calls cuMemFree, so only the first release frees; the cleanup's
release finds no pointer and returns.

Report: https://github.com/deeplearning4j/deeplearning4j/pull/6541 -- to avoid a double free, the memory
manager sets the pointer to null after freeing the device memory.

Expected findings: none (no error, no warning).

    ctxlab audit -- examples/realworld/clean_freed_staging_release_clears_pointer.py
"""

import os
import sys
import threading

import numpy as np
from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

N = 1 << 20


class Staging:
    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.ptr = check(driver.cuMemAlloc(nbytes), "cuMemAlloc")
        self._lock = threading.Lock()
        self.frees = 0

    def release(self) -> None:
        with self._lock:
            ptr, self.ptr = self.ptr, None
            if ptr is None:
                return
            check(driver.cuMemFree(ptr), "cuMemFree")
            self.frees += 1


def upload(dev, staging: Staging, model_in, batch: np.ndarray) -> None:
    primary = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    try:
        check(driver.cuMemcpyHtoD(staging.ptr, batch.ctypes.data, batch.nbytes), "cuMemcpyHtoD")
        check(driver.cuMemcpyDtoD(model_in, staging.ptr, batch.nbytes), "cuMemcpyDtoD")
        staging.release()
    finally:
        check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
        check(driver.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease")


def main() -> int:
    dev = device(0)
    primary = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    staging = Staging(4 * N)
    model_in = check(driver.cuMemAlloc(4 * N), "cuMemAlloc")
    batch = np.arange(N, dtype=np.uint32)
    uploader = threading.Thread(target=upload, args=(dev, staging, model_in, batch), name="uploader")
    uploader.start()
    uploader.join()
    host = np.empty_like(batch)
    check(driver.cuMemcpyDtoH(host.ctypes.data, model_in, host.nbytes), "cuMemcpyDtoH")
    staging.release()  # the cleanup's release: the pointer is already cleared, nothing is freed
    check(driver.cuMemFree(model_in), "cuMemFree")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    check(driver.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease")
    print(f"batch intact: {bool((host == batch).all())}; staging buffer freed {staging.frees} time(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
