"""A staging buffer the uploader thread frees when it is done with it, freed again by the owner's cleanup.

The main thread allocates a staging buffer for the next batch and hands it to the uploader thread. The
uploader copies the batch in, moves it on into the model's input buffer and then, taking the staging
buffer for its own, frees it. The main thread, which allocated it, frees it again in its cleanup: the
second cuMemFree of a pointer that is already freed fails with CUDA_ERROR_INVALID_VALUE. (Nothing is
allocated between the two frees, so the address cannot have been handed out again.)

Report: https://github.com/NVIDIA/cuda-samples/pull/52 -- sample code frees an image's device memory
explicitly and the image's destructor frees it again; the second free fails ("invalid device pointer",
as cuda-memcheck shows).

Expected finding: freed-memory-used on thread MainThread, at the line marked HAZARD in main() (the
second cuMemFree of the staging buffer; the program prints its status).

    ctxlab audit -- examples/realworld/freed_staging_double_free_after_uploader.py
"""

import os
import sys
import threading

import numpy as np
from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

N = 1 << 20


def upload(dev, staging, model_in, batch: np.ndarray, out: dict) -> None:
    primary = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    try:
        check(driver.cuMemcpyHtoD(staging, batch.ctypes.data, batch.nbytes), "cuMemcpyHtoD")
        check(driver.cuMemcpyDtoD(model_in, staging, batch.nbytes), "cuMemcpyDtoD")
        check(driver.cuMemFree(staging), "cuMemFree")  # the uploader treats the staging buffer as its own
        out["uploaded"] = batch.nbytes
    finally:
        check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
        check(driver.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease")


def main() -> int:
    dev = device(0)
    primary = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    staging = check(driver.cuMemAlloc(4 * N), "cuMemAlloc")
    model_in = check(driver.cuMemAlloc(4 * N), "cuMemAlloc")
    batch = np.arange(N, dtype=np.uint32)
    out: dict = {}
    uploader = threading.Thread(target=upload, args=(dev, staging, model_in, batch, out), name="uploader")
    uploader.start()
    uploader.join()
    host = np.empty_like(batch)
    check(driver.cuMemcpyDtoH(host.ctypes.data, model_in, host.nbytes), "cuMemcpyDtoH")
    (err,) = driver.cuMemFree(staging)  # HAZARD: freed-memory-used
    freed_again = err.name
    check(driver.cuMemFree(model_in), "cuMemFree")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    check(driver.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease")
    print(f"uploaded {out.get('uploaded')} bytes, batch intact: {bool((host == batch).all())}; "
          f"the cleanup's cuMemFree of the staging buffer: {freed_again}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
