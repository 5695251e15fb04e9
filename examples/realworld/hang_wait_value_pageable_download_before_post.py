"""A receive loop whose header download into pageable memory blocks behind a doorbell wait, before it posts.

An RDMA receive path (driver API): the stream waits on the receive buffer's doorbell word
(cuStreamWaitValue32, >= 1), then downloads the packet header (cuMemcpyDtoHAsync). A NIC, emulated here by
thread nic-emu, delivers a packet into a buffer only once the host has posted the buffer to it, and then
rings the doorbell with cuStreamWriteValue32 on a stream of its own. The host code enqueues the wait and
the download and posts the buffer afterwards, counting on the "Async" copy to return at once. But the
header buffer is an ordinary numpy array: a device-to-host copy into pageable memory returns only once the
copy has completed, so the host blocks inside cuMemcpyDtoHAsync behind a wait for a doorbell that rings
only after a post that comes after the copy: a hang. The audit's --timeout ends it.

Report: https://github.com/slaclab/aes-stream-drivers/pull/323 -- an rdmaTest hang: cuMemcpyDtoHAsync into
pageable memory, enqueued behind cuStreamWaitValue32 on an FPGA doorbell, "blocks the host inside the
enqueue, which is where an untimed run actually hangs"; the fix drains the wait before enqueueing the copy.

Expected finding: program-hung on thread MainThread, at the line marked HAZARD in receive() (the
cuMemcpyDtoHAsync it is blocked in; thread nic-emu waits in Python for the post and makes no CUDA call).
Ends only when the audit's timeout kills it.

    ctxlab audit -- examples/realworld/hang_wait_value_pageable_download_before_post.py
"""

import os
import sys
import threading

import numpy as np
from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

WORDS = 1 << 16  # one receive buffer, 32-bit words
HEADER_WORDS = 16
NON_BLOCKING = int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)
GEQ = int(driver.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ)


class NicEmulator:
    """Delivers a packet into a posted buffer and rings its doorbell, on a stream of its own."""

    def __init__(self, primary, rx, doorbell) -> None:
        self.primary, self.rx, self.doorbell = primary, rx, doorbell
        self.posted = threading.Event()

    def run(self) -> None:
        self.posted.wait()
        check(driver.cuCtxPushCurrent(self.primary), "cuCtxPushCurrent")
        try:
            dma = check(driver.cuStreamCreate(NON_BLOCKING), "cuStreamCreate")
            check(driver.cuMemsetD32Async(self.rx, 0xC0FFEE, WORDS, dma), "cuMemsetD32Async")
            check(driver.cuStreamWriteValue32(dma, self.doorbell, 1, 0), "cuStreamWriteValue32")
            check(driver.cuStreamSynchronize(dma), "cuStreamSynchronize")
            check(driver.cuStreamDestroy(dma), "cuStreamDestroy")
        finally:
            check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")


def receive(stream, nic: NicEmulator) -> np.ndarray:
    header = np.zeros(HEADER_WORDS, dtype=np.uint32)  # pageable host memory
    check(driver.cuStreamWaitValue32(stream, nic.doorbell, 1, GEQ), "cuStreamWaitValue32")
    nbytes = 4 * HEADER_WORDS
    (err,) = driver.cuMemcpyDtoHAsync(header.ctypes.data, nic.rx, nbytes, stream)  # HAZARD: program-hung
    check(err, "cuMemcpyDtoHAsync")
    nic.posted.set()  # post the buffer to the NIC: never reached
    check(driver.cuStreamSynchronize(stream), "cuStreamSynchronize")
    return header


def main() -> int:
    dev = device(0)
    primary = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    rx = check(driver.cuMemAlloc(4 * WORDS), "cuMemAlloc")
    doorbell = check(driver.cuMemAlloc(4), "cuMemAlloc")
    check(driver.cuMemsetD32(doorbell, 0, 1), "cuMemsetD32")
    stream = check(driver.cuStreamCreate(NON_BLOCKING), "cuStreamCreate")
    nic = NicEmulator(primary, rx, doorbell)
    nic_thread = threading.Thread(target=nic.run, name="nic-emu", daemon=True)
    nic_thread.start()
    header = receive(stream, nic)
    print(f"header {header[:4]} (not expected: the download above never returns)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
