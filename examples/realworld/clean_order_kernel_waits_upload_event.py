"""Clean: a processing kernel whose stream waits for an event recorded after the upload of its input.

The same acquisition pipeline as order_kernel_reads_upload_in_flight.py, done right: the copy stream
records an event after cuMemcpyHtoDAsync, and the processing stream waits for it (cuStreamWaitEvent)
before the kernel, so the kernel reads the whole uploaded frame.

Report: https://github.com/spectralcode/OCTproZ/issues/14 -- the fix proposed there: order the
processing kernels after the async memcpy of their input with cudaStreamWaitEvent.

Expected findings: none.

    ctxlab audit -- examples/realworld/clean_order_kernel_waits_upload_event.py
"""

import ctypes
import os
import sys

import numpy as np
from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _order import BLOCK, GRID, SPIN_PTX, copy_args  # noqa: E402
from _rw import check, device  # noqa: E402

N = 64 << 20  # 64 Mi uint32 samples: 256 MiB
NON_BLOCKING = int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)


def main() -> int:
    dev = device(0)
    primary = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    module = check(driver.cuModuleLoadData(SPIN_PTX), "cuModuleLoadData")
    kern = check(driver.cuModuleGetFunction(module, b"spin_copy_u32"), "cuModuleGetFunction")
    frame_host = check(driver.cuMemAllocHost(4 * N), "cuMemAllocHost")
    np.ctypeslib.as_array((ctypes.c_uint32 * N).from_address(int(frame_host)))[:] = 7
    raw = check(driver.cuMemAlloc(4 * N), "cuMemAlloc")
    processed = check(driver.cuMemAlloc(4 * N), "cuMemAlloc")
    check(driver.cuMemsetD32(raw, 0, N), "cuMemsetD32")
    check(driver.cuMemsetD32(processed, 0, N), "cuMemsetD32")
    check(driver.cuCtxSynchronize(), "cuCtxSynchronize")
    upload = check(driver.cuStreamCreate(NON_BLOCKING), "cuStreamCreate")
    process = check(driver.cuStreamCreate(NON_BLOCKING), "cuStreamCreate")
    check(driver.cuMemcpyHtoDAsync(raw, frame_host, 4 * N, upload), "cuMemcpyHtoDAsync")
    uploaded = check(driver.cuEventCreate(int(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING)), "cuEventCreate")
    check(driver.cuEventRecord(uploaded, upload), "cuEventRecord")
    check(driver.cuStreamWaitEvent(process, uploaded, 0), "cuStreamWaitEvent")  # the kernel after the upload
    args = copy_args(processed, raw, N, 0)  # no wait in the kernel: it just copies what it finds
    (err,) = driver.cuLaunchKernel(kern, GRID, 1, 1, BLOCK, 1, 1, 0, process, args, 0)
    check(err, "cuLaunchKernel")
    check(driver.cuCtxSynchronize(), "cuCtxSynchronize")
    host = np.zeros(N, dtype=np.uint32)
    check(driver.cuMemcpyDtoH(host.ctypes.data, processed, host.nbytes), "cuMemcpyDtoH")
    print(f"samples the kernel saw uploaded (7): {int((host == 7).sum())} of {N} (expected all); "
          f"stale (0): {int((host == 0).sum())}")
    check(driver.cuEventDestroy(uploaded), "cuEventDestroy")
    for stream in (upload, process):
        check(driver.cuStreamDestroy(stream), "cuStreamDestroy")
    for buf in (raw, processed):
        check(driver.cuMemFree(buf), "cuMemFree")
    check(driver.cuMemFreeHost(frame_host), "cuMemFreeHost")
    check(driver.cuModuleUnload(module), "cuModuleUnload")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    check(driver.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
