"""A decode service that keeps the device's default memory pool warm (release threshold raised to the maximum, so
freed blocks stay in the pool across synchronisations), while a memory-trimmer thread added for another
component sets the same pool's threshold back to 0: from then on the service's pool hands its memory back to the
driver at every synchronisation, and each request's cuMemAllocAsync has to map it again.

Report: https://github.com/rapidsai/rmm/pull/2512 -- a library raising the release threshold of the device's
default pool: the change is visible to every user of that pool (and NVIDIA/cccl#6718 does the same for default
pools). Pool attributes are shared state: one component's setting changes another's behaviour.

Expected findings (written from the report, before a run): setting-changed-under on thread cache-trimmer at the
trimmer's cuMemPoolSetAttribute (warning), its because the service's own cuMemPoolSetAttribute on MainThread,
with the service's next cuMemAllocAsync named as the call that then behaved differently. Nothing fails: the
cost is time (memory released and mapped again on every request), not an error.

    ctxlab audit -- examples/realworld/settings_pool_release_threshold_trimmed.py
"""

import os
import sys
import threading

from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

THRESHOLD = driver.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
FRAME = 32 << 20  # 32 MiB a request


def serve(stream, requests: int) -> None:
    for _ in range(requests):
        ptr = check(driver.cuMemAllocAsync(FRAME, stream), "cuMemAllocAsync")
        check(driver.cuMemsetD8Async(ptr, 0, FRAME, stream), "cuMemsetD8Async")
        check(driver.cuMemFreeAsync(ptr, stream), "cuMemFreeAsync")
        check(driver.cuStreamSynchronize(stream), "cuStreamSynchronize")


def trim(ctx, pool) -> None:
    check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    # another component's idea of being a good citizen: give idle pool memory back at every sync
    none = driver.cuuint64_t(0)
    check(driver.cuMemPoolSetAttribute(pool, THRESHOLD, none), "set threshold")  # HAZARD: setting-changed-under


def main() -> None:
    dev = device(0)
    ctx = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    pool = check(driver.cuDeviceGetDefaultMemPool(dev), "cuDeviceGetDefaultMemPool")
    keep = driver.cuuint64_t(0xFFFFFFFFFFFFFFFF)
    check(driver.cuMemPoolSetAttribute(pool, THRESHOLD, keep), "cuMemPoolSetAttribute")  # CAUSE: setting-changed-under
    stream = check(driver.cuStreamCreate(int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)), "cuStreamCreate")
    serve(stream, 2)
    trimmer = threading.Thread(target=trim, args=(ctx, pool), name="cache-trimmer")
    trimmer.start()
    trimmer.join()
    serve(stream, 2)  # now the pool releases its memory at every synchronisation
    check(driver.cuStreamDestroy(stream), "cuStreamDestroy")
    check(driver.cuCtxSetCurrent(driver.CUcontext(0)), "cuCtxSetCurrent")
    check(driver.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease")
    print("served 4 requests; the pool's release threshold was changed under the service")


if __name__ == "__main__":
    main()
