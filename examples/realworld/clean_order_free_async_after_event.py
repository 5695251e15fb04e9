"""Clean: a work buffer freed on a janitor stream that first waits for an event recorded after the kernel.

The same release as order_free_async_other_stream.py, done right: the compute stream records an event
after the kernel that writes the buffer, and the janitor stream waits for that event before its
cuMemFreeAsync, so the free (and the pool's reuse of the block for the next allocation on the janitor
stream) is ordered after the kernel. The new owner finds the 7 it wrote.

Report: https://github.com/JuliaGPU/CUDA.jl/pull/778 -- an asynchronous free on another stream must be
ordered against the memory's uses; the fix makes the finalizer's free wait for them.

Expected findings: none.

    ctxlab audit -- examples/realworld/clean_order_free_async_after_event.py
"""

import os
import sys

import numpy as np
from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _order import BLOCK, GRID, SPIN_PTX, fill_args  # noqa: E402
from _rw import check, device  # noqa: E402

N = 4 << 20  # 4 Mi uint32 values: 16 MiB
NON_BLOCKING = int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)


class WorkBuffer:
    """A solver's device buffer, freed by whoever releases it, on the stream it releases on."""

    def __init__(self, stream) -> None:
        self.ptr = check(driver.cuMemAllocAsync(4 * N, stream), "cuMemAllocAsync")

    def release(self, stream, used) -> None:
        check(driver.cuStreamWaitEvent(stream, used, 0), "cuStreamWaitEvent")  # the uses come first
        check(driver.cuMemFreeAsync(self.ptr, stream), "cuMemFreeAsync")


def main() -> int:
    dev = device(0)
    primary = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    module = check(driver.cuModuleLoadData(SPIN_PTX), "cuModuleLoadData")
    spin_fill = check(driver.cuModuleGetFunction(module, b"spin_fill_u32"), "cuModuleGetFunction")
    compute = check(driver.cuStreamCreate(NON_BLOCKING), "cuStreamCreate")
    janitor = check(driver.cuStreamCreate(NON_BLOCKING), "cuStreamCreate")
    work = WorkBuffer(compute)
    args = fill_args(work.ptr, N, 3)
    (err,) = driver.cuLaunchKernel(spin_fill, GRID, 1, 1, BLOCK, 1, 1, 0, compute, args, 0)
    check(err, "cuLaunchKernel")
    used = check(driver.cuEventCreate(int(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING)), "cuEventCreate")
    check(driver.cuEventRecord(used, compute), "cuEventRecord")
    work.release(janitor, used)  # the finalizer's free, after the kernel
    reused = check(driver.cuMemAllocAsync(4 * N, janitor), "cuMemAllocAsync")  # the pool's next block
    check(driver.cuMemsetD32Async(reused, 7, N, janitor), "cuMemsetD32Async")
    check(driver.cuCtxSynchronize(), "cuCtxSynchronize")
    host = np.zeros(N, dtype=np.uint32)
    check(driver.cuMemcpyDtoH(host.ctypes.data, reused, host.nbytes), "cuMemcpyDtoH")
    same = int(reused) == int(work.ptr)
    print(f"new owner's block is the freed one: {same}; values 7 it wrote still there: {int((host == 7).sum())} "
          f"of {N}; overwritten by the old kernel (3): {int((host == 3).sum())}")
    check(driver.cuMemFreeAsync(reused, janitor), "cuMemFreeAsync")
    check(driver.cuCtxSynchronize(), "cuCtxSynchronize")
    check(driver.cuEventDestroy(used), "cuEventDestroy")
    for stream in (compute, janitor):
        check(driver.cuStreamDestroy(stream), "cuStreamDestroy")
    check(driver.cuModuleUnload(module), "cuModuleUnload")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    check(driver.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
