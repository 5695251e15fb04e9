"""A communication library's watchdog thread that aborts the process when a collective runs past its timeout.

A one-rank emulation of a process group (driver API): all_reduce() makes the communicator's stream wait on
the GPU for the peer's chunk (cuStreamWaitValue32 on the peer's flag), reduces, and records a done event.
The library watches its collectives from a thread of its own, started in C (pthread_create, here through
ctypes) and named comm-watchdog: it polls the done event with cuEventQuery (CUDA_ERROR_NOT_READY is its
answer) and, once the collective has run for 3 s, prints the timeout and calls abort(). The peer never
sends its chunk, so the trainer's thread blocks in cuStreamSynchronize until the watchdog takes the whole
process down with SIGABRT from a thread the program did not start.

Report: https://github.com/vllm-project/vllm/issues/6042 -- "Watchdog caught collective operation timeout":
the process dies by SIGABRT raised in c10d::ProcessGroupNCCL::ncclCommWatchdog() on the watchdog's own
thread, and the reporter asks where the stuck collective was issued.

Expected findings: program-crashed on thread comm-watchdog, at the line marked HAZARD program-crashed in
Communicator._watchdog() (the abort); program-hung on thread MainThread, at the line marked HAZARD
program-hung in main() (the cuStreamSynchronize of the collective that never finished), its because at the
line marked CAUSE in all_reduce() (the wait for the peer's chunk). The watchdog's
cuEventQuery answers (not ready) are no findings. Ends by SIGABRT about 3 s after the collective starts.

    ctxlab audit -- examples/realworld/crash_comm_watchdog_thread_aborts_on_collective_timeout.py
"""

import ctypes
import os
import sys
import time

from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

TIMEOUT_S = 3.0
POLL_S = 0.05
WORDS = 1 << 20
NON_BLOCKING = int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)
GEQ = int(driver.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ)
NO_TIMING = int(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING)

LIBC = ctypes.CDLL(None)
THREAD_START = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
LIBC.pthread_create.argtypes = [ctypes.POINTER(ctypes.c_ulong), ctypes.c_void_p, THREAD_START, ctypes.c_void_p]
LIBC.pthread_self.restype = ctypes.c_ulong
LIBC.pthread_setname_np.argtypes = [ctypes.c_ulong, ctypes.c_char_p]


class Communicator:
    def __init__(self, primary) -> None:
        self.primary = primary
        self.stream = check(driver.cuStreamCreate(NON_BLOCKING), "cuStreamCreate")
        self.peer_flag = check(driver.cuMemAlloc(4), "cuMemAlloc")
        self.chunk = check(driver.cuMemAlloc(4 * WORDS), "cuMemAlloc")
        check(driver.cuMemsetD32(self.peer_flag, 0, 1), "cuMemsetD32")
        self.done = check(driver.cuEventCreate(NO_TIMING), "cuEventCreate")
        self.started: float | None = None
        self._entry = THREAD_START(self._watchdog)  # kept alive as long as the thread runs
        self._thread = ctypes.c_ulong()
        if LIBC.pthread_create(ctypes.byref(self._thread), None, self._entry, None) != 0:
            raise OSError("pthread_create failed")

    def all_reduce(self) -> None:
        # wait on the GPU for the peer's chunk, reduce, mark done
        (err,) = driver.cuStreamWaitValue32(self.stream, self.peer_flag, 1, GEQ)  # CAUSE: program-hung
        check(err, "cuStreamWaitValue32")
        check(driver.cuMemsetD32Async(self.chunk, 0, WORDS, self.stream), "cuMemsetD32Async")  # the reduction
        check(driver.cuEventRecord(self.done, self.stream), "cuEventRecord")
        self.started = time.monotonic()

    def _watchdog(self, _arg):
        LIBC.pthread_setname_np(LIBC.pthread_self(), b"comm-watchdog")
        check(driver.cuCtxSetCurrent(self.primary), "cuCtxSetCurrent")
        while True:
            time.sleep(POLL_S)
            if self.started is None:
                continue  # nothing issued yet (an event never recorded counts as complete)
            (err,) = driver.cuEventQuery(self.done)
            if err == driver.CUresult.CUDA_SUCCESS:
                return None
            ran = time.monotonic() - self.started
            if ran > TIMEOUT_S:
                print(f"[Rank 0] Watchdog caught collective operation timeout: ALLREDUCE ran for {ran * 1000:.0f} ms "
                      f"before timing out; taking the entire process down", flush=True)
                os.abort()  # HAZARD: program-crashed


def main() -> int:
    primary = check(driver.cuDevicePrimaryCtxRetain(device(0)), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    comm = Communicator(primary)
    comm.all_reduce()
    check(driver.cuStreamSynchronize(comm.stream), "cuStreamSynchronize")  # HAZARD: program-hung
    print("all-reduce done (not expected: the peer never sends its chunk)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
