"""Clean: an autotuner whose block-size search stops at the kernel's maximum threads per block.

The same launcher as the off-by-one program, with the report's fix: the one-at-a-time step runs while
the block is smaller than the kernel's maximum (`<`), so the search ends at 1024 threads, the launch
goes through, and the program checks what the kernel wrote.

Report: https://github.com/isaac-for-healthcare/i4h-sensor-simulation/issues/59 -- the block-size loop's
condition must be `<`, not `<=`, so that the block never exceeds the 1024-thread limit.

Expected findings: none (no error, no warning).

    ctxlab audit -- examples/realworld/clean_launchcfg_block_size_within_limit.py
"""

import os
import sys
import threading

import numpy as np
from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import FILL_PTX, check, device, fill_args  # noqa: E402

N = 1 << 20


def pick_block(limit: int) -> int:
    block = 32
    while block * 2 <= limit:
        block *= 2
    while block < limit:
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
        check(driver.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, stream, fill_args(buf, N, 5), 0), "cuLaunchKernel")
        check(driver.cuStreamSynchronize(stream), "cuStreamSynchronize")
        host = np.empty(N, dtype=np.uint32)
        check(driver.cuMemcpyDtoH(host.ctypes.data, buf, host.nbytes), "cuMemcpyDtoH")
        out.update(limit=limit, block=block, right=bool((host == 5).all()))
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
          f"result right: {out.get('right')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
