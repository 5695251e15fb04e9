"""An autotuner whose block-size search steps one past the kernel's limit: a launch of 1025 threads per block.

A kernel launcher picks its block size at run time, on an autotuning thread: it starts from a warp,
doubles the size while the double still fits the kernel's maximum threads per block (1024 for this
kernel, read with cuFuncGetAttribute), then adds threads one at a time "while the block is not larger than
the maximum", a condition still true at 1024, so the search ends at 1025. cuLaunchKernel refuses the
configuration with CUDA_ERROR_INVALID_VALUE (through the runtime API the same launch gives
cudaErrorInvalidConfiguration); the program prints the status.

Report: https://github.com/isaac-for-healthcare/i4h-sensor-simulation/issues/59 -- an off-by-one in the
launcher's block-size loop (`<=` for `<`) produces blocks of more than 1024 threads, and every kernel
launch through it fails with cudaErrorInvalidConfiguration (error 9).

Expected finding: launch-config on thread autotune, at the line marked HAZARD in autotune() (the
cuLaunchKernel with a block of 1025 threads).

    ctxlab audit -- examples/realworld/launchcfg_block_size_off_by_one_autotune.py
"""

import os
import sys
import threading

from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import FILL_PTX, check, device, fill_args  # noqa: E402

N = 1 << 20


def pick_block(limit: int) -> int:
    block = 32
    while block * 2 <= limit:
        block *= 2
    while block <= limit:  # the off-by-one: still true when block == limit
        block += 1
    return block


def autotune(dev, out: dict) -> None:
    primary = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    try:
        module = check(driver.cuModuleLoadData(FILL_PTX), "cuModuleLoadData")
        fn = check(driver.cuModuleGetFunction(module, b"fill_u32"), "cuModuleGetFunction")
        limit = check(driver.cuFuncGetAttribute(
            driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn), "cuFuncGetAttribute")
        stream = check(driver.cuStreamCreate(int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)), "cuStreamCreate")
        buf = check(driver.cuMemAlloc(4 * N), "cuMemAlloc")
        block = pick_block(limit)
        grid = (N + block - 1) // block
        (err,) = driver.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, stream, fill_args(buf, N, 5), 0)  # HAZARD: launch-config  # noqa: E501
        out.update(limit=limit, block=block, launch=err.name)
        check(driver.cuStreamSynchronize(stream), "cuStreamSynchronize")
        check(driver.cuMemFree(buf), "cuMemFree")
        check(driver.cuStreamDestroy(stream), "cuStreamDestroy")
        check(driver.cuModuleUnload(module), "cuModuleUnload")
    finally:
        check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
        check(driver.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease")


def main() -> int:
    dev = device(0)
    out: dict = {}
    worker = threading.Thread(target=autotune, args=(dev, out), name="autotune")
    worker.start()
    worker.join()
    print(f"kernel limit {out.get('limit')} threads per block; block chosen {out.get('block')}; "
          f"cuLaunchKernel: {out.get('launch')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
