"""A workspace cache whose atexit cleanup frees device memory after the application released the GPU at exit.

A library keeps a device workspace and registers, when it is set up, an atexit handler that frees it.
The application registers its own shutdown handler later: it pops the primary context it retained and
releases it, which takes the primary context's count to zero and destroys it. atexit runs handlers
last-registered first, so the release runs before the library's cleanup, which then frees memory of a
context that no longer exists. The cleanup prints the status it got.

Report: https://github.com/NVIDIA/cuda-python/issues/1063 -- Buffer.__del__ runs after the CUDA context
was destroyed at process shutdown, with errors (and crashes) in the late free; also
https://github.com/kaldi-asr/kaldi/issues/2178 (the context is destroyed during atexit, before a static
object's destructor frees its memory).

Expected finding: used-after-teardown on thread MainThread, at the line marked HAZARD in
Workspace.close() (the cuMemFree after the release marked TEARDOWN). Both run as atexit handlers, after
main() has returned.

    ctxlab audit -- examples/realworld/teardown_atexit_free_after_release.py
"""

import atexit
import os
import sys

from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402


class Workspace:
    def __init__(self) -> None:
        self.ptr = None
        atexit.register(self.close)  # registered first: runs last

    def get(self, nbytes: int):
        if self.ptr is None:
            self.ptr = check(driver.cuMemAlloc(nbytes), "cuMemAlloc")
        return self.ptr

    def close(self) -> None:
        if self.ptr is not None:
            (err,) = driver.cuMemFree(self.ptr)  # HAZARD: used-after-teardown
            print(f"atexit: workspace cuMemFree after the GPU was released: {err.name}", flush=True)
            self.ptr = None


def release_gpu(dev) -> None:
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    (err,) = driver.cuDevicePrimaryCtxRelease(dev)  # TEARDOWN: the count goes to zero
    print(f"atexit: primary context released: {err.name}", flush=True)


def main() -> int:
    workspace = Workspace()
    dev = device(0)
    primary = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    atexit.register(release_gpu, dev)  # registered second: runs first
    ptr = workspace.get(1 << 20)
    check(driver.cuMemsetD32(ptr, 7, (1 << 20) // 4), "cuMemsetD32")
    check(driver.cuCtxSynchronize(), "cuCtxSynchronize")
    print("work done; the atexit handlers run next", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
