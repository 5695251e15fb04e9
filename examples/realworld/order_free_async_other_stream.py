"""A work buffer freed stream-ordered on a janitor stream while a kernel on the compute stream still writes it.

A solver allocates its work buffer with cuMemAllocAsync on its compute stream and launches a kernel that
writes it (the kernel is long: it waits 50 ms on the GPU clock first). The buffer's owner object is then
released from cleanup code that runs on its own "janitor" stream, as a garbage-collector finalizer does,
and it frees the buffer there with cuMemFreeAsync. Nothing orders the compute stream's kernel before that
free: the pool hands the same memory to the next cuMemAllocAsync on the janitor stream, whose owner fills
it with 7, and the still-running kernel then writes 3 over it. No call fails; the program prints the
values the new owner finds and the ones it wrote.

Report: https://github.com/JuliaGPU/CUDA.jl/pull/778 -- finalizers run on a different task and so on a
different stream; an asynchronous free there "doesn't order against any of the memory's uses", freeing
the memory while a long-running kernel on the array's stream still uses it.

Expected finding: freed-while-in-use on thread MainThread, at the line marked HAZARD in release() (the
cuMemFreeAsync on the janitor stream); its cause is the kernel launch on the compute stream, the line
marked CAUSE in main().

    ctxlab audit -- examples/realworld/order_free_async_other_stream.py
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

    def release(self, stream) -> None:
        check(driver.cuMemFreeAsync(self.ptr, stream), "cuMemFreeAsync")  # HAZARD: freed-while-in-use


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
    (err,) = driver.cuLaunchKernel(spin_fill, GRID, 1, 1, BLOCK, 1, 1, 0, compute, args, 0)  # CAUSE: freed-while-in-use
    check(err, "cuLaunchKernel")
    work.release(janitor)  # the finalizer's free, on its own stream
    reused = check(driver.cuMemAllocAsync(4 * N, janitor), "cuMemAllocAsync")  # the pool's next block
    check(driver.cuMemsetD32Async(reused, 7, N, janitor), "cuMemsetD32Async")
    check(driver.cuCtxSynchronize(), "cuCtxSynchronize")
    host = np.zeros(N, dtype=np.uint32)
    check(driver.cuMemcpyDtoH(host.ctypes.data, reused, host.nbytes), "cuMemcpyDtoH")
    same = int(reused) == int(work.ptr)
    print(f"new owner's block is the freed one: {same}; values 7 it wrote still there: {int((host == 7).sum())} "
          f"of {N}; overwritten by the old kernel (3): {int((host == 3).sum())} (expected 0)")
    check(driver.cuMemFreeAsync(reused, janitor), "cuMemFreeAsync")
    check(driver.cuCtxSynchronize(), "cuCtxSynchronize")
    for stream in (compute, janitor):
        check(driver.cuStreamDestroy(stream), "cuStreamDestroy")
    check(driver.cuModuleUnload(module), "cuModuleUnload")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    check(driver.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
