"""Clean (two GPUs): a peer copy between the primary contexts of GPU 0 and GPU 1, access enabled per context.

The program retains both primary contexts and, with each one current in turn, enables access to the
other (cuCtxEnablePeerAccess acts on the current context), then copies GPU 0's buffer to GPU 1 with
cuMemcpyPeer and checks the result on the host. Where the GPUs cannot access each other it says so and
copies anyway (cuMemcpyPeer stages through the host).

Report: https://github.com/inducer/pycuda/issues/71 -- enable_peer_access fails unless the context it is
called for is current: make k40's context current before enabling its access to k20's.

Expected findings: none (no error, no warning).

    ctxlab audit -- examples/realworld/two_gpu/clean_peer_copy_access_enabled.py
"""

import os
import sys

import numpy as np
from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _rw import check, device  # noqa: E402

N = 1 << 20


def main() -> int:
    devs = [device(0), device(1)]
    ctxs = [check(driver.cuDevicePrimaryCtxRetain(d), "cuDevicePrimaryCtxRetain") for d in devs]
    can = bool(check(driver.cuDeviceCanAccessPeer(devs[0], devs[1]), "cuDeviceCanAccessPeer"))
    can = can and bool(check(driver.cuDeviceCanAccessPeer(devs[1], devs[0]), "cuDeviceCanAccessPeer"))
    bufs = []
    for me, other in ((0, 1), (1, 0)):
        check(driver.cuCtxPushCurrent(ctxs[me]), "cuCtxPushCurrent")
        if can:  # access for the current context to the other one's memory
            check(driver.cuCtxEnablePeerAccess(ctxs[other], 0), "cuCtxEnablePeerAccess")
        bufs.append(check(driver.cuMemAlloc(4 * N), "cuMemAlloc"))
        check(driver.cuMemsetD32(bufs[me], 11 * (me + 1), N), "cuMemsetD32")
        check(driver.cuCtxSynchronize(), "cuCtxSynchronize")
        check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    host = np.empty(N, dtype=np.uint32)
    check(driver.cuCtxPushCurrent(ctxs[1]), "cuCtxPushCurrent")
    check(driver.cuMemcpyPeer(bufs[1], ctxs[1], bufs[0], ctxs[0], 4 * N), "cuMemcpyPeer")
    check(driver.cuMemcpyDtoH(host.ctypes.data, bufs[1], 4 * N), "cuMemcpyDtoH")
    check(driver.cuMemFree(bufs[1]), "cuMemFree")
    if can:
        check(driver.cuCtxDisablePeerAccess(ctxs[0]), "cuCtxDisablePeerAccess")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    check(driver.cuCtxPushCurrent(ctxs[0]), "cuCtxPushCurrent")
    check(driver.cuMemFree(bufs[0]), "cuMemFree")
    if can:
        check(driver.cuCtxDisablePeerAccess(ctxs[1]), "cuCtxDisablePeerAccess")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    for d in devs:
        check(driver.cuDevicePrimaryCtxRelease(d), "cuDevicePrimaryCtxRelease")
    print(f"peer access {'enabled both ways' if can else 'not supported'}; GPU 1 received {set(host.tolist())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
