"""A download-completion host function that reads its page-locked slot after the pool took the slot back.

A frame grabber downloads each decoded frame into a slot of a page-locked staging pool (cuMemAllocHost) and
queues, behind the download, a host function (cudaLaunchHostFunc) that checks the frame's header in the
slot. The frame is complete only once the decoder rings its ready word, so the stream waits for that on the
GPU (cuStreamWaitValue32). The grabber's cleanup hands the slot back to the pool as soon as the download is
enqueued, and the pool clears a returned slot's pointer. The host function runs later, on CUDA's own
host-function thread, a thread the program did not start, and reads through the cleared pointer: SIGSEGV
there. The ready word is rung a second after the slot went back, so the order is the same on every run.

Report: https://github.com/lupinemachines/lupine/issues/852 -- a cuLaunchHostFunc callback that reads a
pinned allocation faults on the driver's callback thread, and the process dies by SIGSEGV; only the sample
that posts a host callback reading pinned memory crashes.

Expected finding: program-crashed on CUDA's host-function thread (named as the OS names it: "python..."), at
the line marked HAZARD in on_downloaded(), its because at the line marked CAUSE in grab(). Ends by SIGSEGV.

    ctxlab audit -- examples/realworld/crash_host_func_reads_slot_pool_took_back.py

Corrected after H100 audits. The program: the first read the slot with ctypes.string_at, which for a null
pointer reads nothing (it ended normally), the second through a ctypes array at the slot's address, which read a
Python object (the same); it now copies the header with ctypes.memmove, which reads the address it is given. The
expectation's thread, after the third audit placed crash, line and cause as expected: it said "cuda...", a guess
at the name the driver gives its host-function thread; driver 580 leaves it the process's name ("python3 (TID)"
in the report, a thread the program did not start), so the expected thread is now "python".
"""

import ctypes
import os
import sys
import time

from cuda.bindings import driver, runtime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check  # noqa: E402

SLOT_BYTES = 1 << 20
DECODE_S = 1.0  # the decoder finishes the frame about a second after the grab is queued
NON_BLOCKING = int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)
GEQ = int(driver.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ)
HOST_FN = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p)  # as cuda-bindings' own tests declare host functions


class Slot:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class StagingPool:
    """Page-locked slots; a slot handed back is cleared and its memory goes on the free list."""

    def __init__(self, count: int) -> None:
        self.free = [check(driver.cuMemAllocHost(SLOT_BYTES), "cuMemAllocHost") for _ in range(count)]

    def take(self) -> Slot:
        return Slot(self.free.pop())

    def give_back(self, slot: Slot) -> None:
        self.free.append(slot.ptr)
        slot.ptr = 0


def grab(pool: StagingPool, stream, frame, ready, keep: list) -> None:
    slot = pool.take()
    check(driver.cuStreamWaitValue32(stream, ready, 1, GEQ), "cuStreamWaitValue32")  # the decoder's ready word
    check(driver.cuMemcpyDtoHAsync(slot.ptr, frame, SLOT_BYTES, stream), "cuMemcpyDtoHAsync")

    def on_downloaded(_user) -> int:
        header = ctypes.create_string_buffer(16)
        ctypes.memmove(header, slot.ptr, 16)  # HAZARD: program-crashed
        print(f"frame header {header.raw.hex()}", flush=True)
        return 0

    callback = HOST_FN(on_downloaded)
    keep.append(callback)
    fn = runtime.cudaHostFn_t(_ptr=ctypes.addressof(callback))
    check(runtime.cudaLaunchHostFunc(int(stream), fn, 0), "cudaLaunchHostFunc")  # CAUSE: program-crashed
    pool.give_back(slot)  # cleanup: the download is enqueued, so the slot "is free" (it is not)


def main() -> int:
    check(runtime.cudaSetDevice(0), "cudaSetDevice")
    check(runtime.cudaFree(0), "cudaFree")  # the runtime's context is current on this thread from here
    stream = check(driver.cuStreamCreate(NON_BLOCKING), "cuStreamCreate")
    decoder = check(driver.cuStreamCreate(NON_BLOCKING), "cuStreamCreate")
    frame = check(driver.cuMemAlloc(SLOT_BYTES), "cuMemAlloc")
    ready = check(driver.cuMemAlloc(4), "cuMemAlloc")
    check(driver.cuMemsetD32(frame, 0x5A5A5A5A, SLOT_BYTES // 4), "cuMemsetD32")
    check(driver.cuMemsetD32(ready, 0, 1), "cuMemsetD32")
    pool, keep = StagingPool(2), []
    grab(pool, stream, frame, ready, keep)
    time.sleep(DECODE_S)
    check(driver.cuStreamWriteValue32(decoder, ready, 1, 0), "cuStreamWriteValue32")  # the decoder rings ready
    check(driver.cuStreamSynchronize(stream), "cuStreamSynchronize")
    print("frame grabbed (not expected: the host function reads a slot the pool took back)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
