"""A step timer that asks cudaEventElapsedTime for a step whose end event has not completed yet.

A training step (runtime API, one driver call) records a start event on its stream, waits on the GPU for
the data loader's doorbell (cuStreamWaitValue32: the batch is in place), runs, and records an end event.
The step timer then calls cudaEventElapsedTime at once, without cudaEventSynchronize on the end event: the
end event is still pending (the loader rings its doorbell only afterwards), so the call returns
cudaErrorNotReady and no time. The timer ignores the status and logs 0.000 ms for the step. Not-ready is
the answer of a query (cudaEventQuery); for cudaEventElapsedTime it means the timing it needed was not
there: a failed call. The program then rings the doorbell, synchronises and times the step correctly.

Report: https://github.com/cupy/cupy/issues/5678 -- CuPy's stream example calls get_elapsed_time on an end
event it has not synchronised; cudaEventElapsedTime returns cudaErrorNotReady ("device not ready") whenever
the event is not done yet, and the example needs to synchronise first.

Expected finding: failed-call on thread MainThread, at the line marked HAZARD in time_step() (the
cudaEventElapsedTime that returned cudaErrorNotReady). The second cudaEventElapsedTime, after the
synchronize, succeeds. Exits 0.

    ctxlab audit -- examples/realworld/failed_event_elapsed_time_before_end_event_completes.py
"""

import os
import sys

from cuda.bindings import driver, runtime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check  # noqa: E402

BATCH_BYTES = 64 << 20
GEQ = int(driver.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ)


def time_step(stream, loader, batch, doorbell) -> None:
    start = check(runtime.cudaEventCreate(), "cudaEventCreate")
    end = check(runtime.cudaEventCreate(), "cudaEventCreate")
    check(runtime.cudaEventRecord(start, stream), "cudaEventRecord")
    check(driver.cuStreamWaitValue32(driver.CUstream(int(stream)), doorbell, 1, GEQ), "cuStreamWaitValue32")
    check(runtime.cudaMemsetAsync(batch, 0, BATCH_BYTES, stream), "cudaMemsetAsync")  # the step
    check(runtime.cudaEventRecord(end, stream), "cudaEventRecord")
    err, ms = runtime.cudaEventElapsedTime(start, end)  # HAZARD: failed-call
    print(f"step 0: {ms:.3f} ms (status ignored: {err.name})", flush=True)
    # the loader rings the doorbell; this time the timer waits for the end event first
    check(driver.cuStreamWriteValue32(driver.CUstream(int(loader)), doorbell, 1, 0), "cuStreamWriteValue32")
    check(runtime.cudaEventSynchronize(end), "cudaEventSynchronize")
    ms = check(runtime.cudaEventElapsedTime(start, end), "cudaEventElapsedTime")
    print(f"step 0 after synchronising: {ms:.3f} ms", flush=True)
    check(runtime.cudaEventDestroy(start), "cudaEventDestroy")
    check(runtime.cudaEventDestroy(end), "cudaEventDestroy")


def main() -> int:
    check(runtime.cudaSetDevice(0), "cudaSetDevice")
    stream = check(runtime.cudaStreamCreateWithFlags(runtime.cudaStreamNonBlocking), "cudaStreamCreateWithFlags")
    loader = check(runtime.cudaStreamCreateWithFlags(runtime.cudaStreamNonBlocking), "cudaStreamCreateWithFlags")
    batch = check(runtime.cudaMalloc(BATCH_BYTES), "cudaMalloc")
    doorbell = check(runtime.cudaMalloc(4), "cudaMalloc")
    check(runtime.cudaMemset(doorbell, 0, 4), "cudaMemset")
    check(runtime.cudaDeviceSynchronize(), "cudaDeviceSynchronize")
    time_step(stream, loader, batch, doorbell)
    for ptr in (batch, doorbell):
        check(runtime.cudaFree(ptr), "cudaFree")
    for s in (stream, loader):
        check(runtime.cudaStreamDestroy(s), "cudaStreamDestroy")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
