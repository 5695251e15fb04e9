"""A step log written by a host function on the legacy default stream, which a blocking stream then waits for.

A training loop records each step in its run log with a host function (cudaLaunchHostFunc) queued on the
legacy default stream (stream 0); the function waits until the step's record has been published, which the
loop does once the step is done. The step itself runs on a stream made with cuStreamCreate(flags 0), a
blocking stream: work queued on a blocking stream waits for the work queued before it on the legacy default
stream, so the step's memset waits for the host function, the host function waits for the loop, and the loop
waits in cuStreamSynchronize for the step. The job script guards the run with signal.alarm(3) and no
handler, so SIGALRM's default action ends the process after 3 s (exit status 142 without ctxlab).

Report: https://github.com/LMCache/LMCache/pull/2952 -- "Fix deadlock caused by cuda launch host func": a
host function enqueued with cudaLaunchHostFunc waits on host-side state that is only produced after the
thread that enqueued it has synchronised, so the stream, the host function and the thread wait on each other.

Expected finding: program-hung on thread MainThread, at the line marked HAZARD in run_step() (the
cuStreamSynchronize it is blocked in), with its because at the line marked CAUSE (the cudaLaunchHostFunc on
the legacy default stream that the step waits for). No program-crashed: SIGALRM only ended a process that
was stuck.

    ctxlab audit -- examples/realworld/hang_sigalrm_default_action_sync_behind_legacy_host_func.py
"""

import ctypes
import os
import signal
import sys
import threading

from cuda.bindings import driver, runtime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check  # noqa: E402

DEADLINE_S = 3
WORDS = 1 << 20
BLOCKING = int(driver.CUstream_flags.CU_STREAM_DEFAULT)
HOST_FN = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p)  # as cuda-bindings' own tests declare host functions


class RunLog:
    def __init__(self) -> None:
        self.published = threading.Event()
        self.lines: list[str] = []

    def write_step(self, _user) -> int:
        """Host function: append the step's record once the loop has published it."""
        self.published.wait()
        self.lines.append("step 0 done")
        return 0


def run_step(log: RunLog, stream, buf, keep: list) -> None:
    callback = HOST_FN(log.write_step)
    keep.append(callback)
    fn = runtime.cudaHostFn_t(_ptr=ctypes.addressof(callback))
    check(runtime.cudaLaunchHostFunc(0, fn, 0), "cudaLaunchHostFunc")  # CAUSE: program-hung (on stream 0)
    check(driver.cuMemsetD32Async(buf, 7, WORDS, stream), "cuMemsetD32Async")  # the step
    check(driver.cuStreamSynchronize(stream), "cuStreamSynchronize")  # HAZARD: program-hung
    log.published.set()


def main() -> int:
    signal.alarm(DEADLINE_S)  # the job script's guard: no handler, so SIGALRM ends the process
    check(runtime.cudaSetDevice(0), "cudaSetDevice")
    check(runtime.cudaFree(0), "cudaFree")  # the runtime's context is current on this thread from here
    stream = check(driver.cuStreamCreate(BLOCKING), "cuStreamCreate")
    buf = check(driver.cuMemAlloc(4 * WORDS), "cuMemAlloc")
    log, keep = RunLog(), []
    run_step(log, stream, buf, keep)
    signal.alarm(0)
    print(f"run log: {log.lines} (not expected: the step waits behind its own log record)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
