"""Clean: a receive loop that downloads its header into pinned memory, posts the buffer, then synchronises.

The same RDMA receive path as hang_wait_value_pageable_download_before_post.py: the stream waits on the
receive buffer's doorbell (cuStreamWaitValue32, >= 1) and downloads the packet header; the NIC, emulated by
thread nic-emu, delivers into a posted buffer and rings the doorbell with cuStreamWriteValue32 on a stream
of its own. Here the header buffer is page-locked (cuMemHostAlloc), so cuMemcpyDtoHAsync only enqueues
the copy and returns; the host posts the buffer, and only then waits for the stream
(cuStreamSynchronize), which the NIC's doorbell releases. The NIC thread pushes the primary context for
its work and pops it in a finally block.

Report: https://github.com/slaclab/aes-stream-drivers/pull/323 -- a device-to-host "Async" copy into
pageable memory behaves synchronously; nothing the host must do to release a stream wait may come after a
call that blocks on that wait.

Expected findings: none (no error, no warning).

    ctxlab audit -- examples/realworld/clean_wait_value_pinned_download_post_then_sync.py
"""

import ctypes
import os
import sys
import threading

from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

WORDS = 1 << 16  # one receive buffer, 32-bit words
HEADER_WORDS = 16
PAYLOAD = 0xC0FFEE
NON_BLOCKING = int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)
GEQ = int(driver.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ)


class NicEmulator:
    """Delivers a packet into a posted buffer and rings its doorbell, on a stream of its own."""

    def __init__(self, primary, rx, doorbell) -> None:
        self.primary, self.rx, self.doorbell = primary, rx, doorbell
        self.posted = threading.Event()

    def run(self) -> None:
        if not self.posted.wait(60):
            return
        check(driver.cuCtxPushCurrent(self.primary), "cuCtxPushCurrent")
        try:
            dma = check(driver.cuStreamCreate(NON_BLOCKING), "cuStreamCreate")
            check(driver.cuMemsetD32Async(self.rx, PAYLOAD, WORDS, dma), "cuMemsetD32Async")
            check(driver.cuStreamWriteValue32(dma, self.doorbell, 1, 0), "cuStreamWriteValue32")
            check(driver.cuStreamSynchronize(dma), "cuStreamSynchronize")
            check(driver.cuStreamDestroy(dma), "cuStreamDestroy")
        finally:
            check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")


def receive(stream, nic: NicEmulator) -> list:
    header = check(driver.cuMemHostAlloc(4 * HEADER_WORDS, 0), "cuMemHostAlloc")  # page-locked
    try:
        check(driver.cuStreamWaitValue32(stream, nic.doorbell, 1, GEQ), "cuStreamWaitValue32")
        check(driver.cuMemcpyDtoHAsync(header, nic.rx, 4 * HEADER_WORDS, stream), "cuMemcpyDtoHAsync")
        nic.posted.set()  # post the buffer to the NIC, then wait for the packet
        check(driver.cuStreamSynchronize(stream), "cuStreamSynchronize")
        return list((ctypes.c_uint32 * HEADER_WORDS).from_address(int(header)))
    finally:
        check(driver.cuMemFreeHost(header), "cuMemFreeHost")


def main() -> int:
    dev = device(0)
    primary = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    rx = check(driver.cuMemAlloc(4 * WORDS), "cuMemAlloc")
    doorbell = check(driver.cuMemAlloc(4), "cuMemAlloc")
    check(driver.cuMemsetD32(doorbell, 0, 1), "cuMemsetD32")
    stream = check(driver.cuStreamCreate(NON_BLOCKING), "cuStreamCreate")
    nic = NicEmulator(primary, rx, doorbell)
    nic_thread = threading.Thread(target=nic.run, name="nic-emu")
    nic_thread.start()
    header = receive(stream, nic)
    nic_thread.join()
    check(driver.cuStreamDestroy(stream), "cuStreamDestroy")
    check(driver.cuMemFree(doorbell), "cuMemFree")
    check(driver.cuMemFree(rx), "cuMemFree")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    check(driver.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease")
    print(f"header words {[hex(w) for w in header[:4]]}; all the payload: {all(w == PAYLOAD for w in header)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
