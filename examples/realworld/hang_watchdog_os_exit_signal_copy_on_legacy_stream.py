"""A sender whose synchronous credit read waits behind the receiver that waits for the sender's signal.

A one-process emulation of a port-channel exchange (driver API): the receiver's stream, an ordinary blocking
stream (cuStreamCreate with flags 0), waits on the GPU for its signal word (cuStreamWaitValue32, >= 1) and
then consumes its inbox. Before it sends, the sender reads the receiver's credit word with a plain
cuMemcpyDtoH. A synchronous copy runs on the context's legacy default stream, and the legacy default
stream first waits for all work queued on every blocking stream: the credit read waits for the receiver,
the receiver waits for the signal, and the signal comes after the read. A device-to-host copy into pageable
memory returns only once it has completed, so the sender is stuck inside it. The program's own step
watchdog (thread step-watchdog) gives the exchange 3 s, then ends the process with os._exit(2).

Report: https://github.com/microsoft/mscclpp/issues/503 -- a signal/wait between two peers hangs when the
program runs on the default stream and also issues a copy there: the copy on the NULL stream interferes
with the copy that delivers the signal, so the signal is never delivered and the wait never ends.

Expected finding: program-hung on thread MainThread, at the line marked HAZARD in exchange() (the
cuMemcpyDtoH it is blocked in), with its because at the line marked CAUSE (the cuStreamWaitValue32 queued
on the receiver's blocking stream, which the legacy default stream waits for). Ends by the watchdog's
os._exit(2) on thread step-watchdog, about 3 s after the exchange starts.

    ctxlab audit -- examples/realworld/hang_watchdog_os_exit_signal_copy_on_legacy_stream.py
"""

import os
import sys
import threading

import numpy as np
from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

DEADLINE_S = 3.0
WORDS = 1 << 20
BLOCKING = int(driver.CUstream_flags.CU_STREAM_DEFAULT)
GEQ = int(driver.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ)


def exchange(recv, signal_word, credit_word, inbox) -> None:
    # receiver: wait for the signal word on the GPU, then consume the inbox
    check(driver.cuStreamWaitValue32(recv, signal_word, 1, GEQ), "cuStreamWaitValue32")  # CAUSE: program-hung
    check(driver.cuMemsetD32Async(inbox, 0, WORDS, recv), "cuMemsetD32Async")
    # sender: read the receiver's credit, then deliver the signal word
    credit = np.zeros(1, dtype=np.uint32)
    check(driver.cuMemcpyDtoH(credit.ctypes.data, credit_word, 4), "cuMemcpyDtoH")  # HAZARD: program-hung
    one = np.ones(1, dtype=np.uint32)
    check(driver.cuMemcpyHtoD(signal_word, one.ctypes.data, 4), "cuMemcpyHtoD")
    check(driver.cuStreamSynchronize(recv), "cuStreamSynchronize")


def watchdog(done: threading.Event) -> None:
    if done.wait(DEADLINE_S):
        return
    print(f"step-watchdog: exchange still blocked after {DEADLINE_S:.0f} s; exiting", flush=True)
    os._exit(2)


def main() -> int:
    primary = check(driver.cuDevicePrimaryCtxRetain(device(0)), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    recv = check(driver.cuStreamCreate(BLOCKING), "cuStreamCreate")
    signal_word = check(driver.cuMemAlloc(4), "cuMemAlloc")
    credit_word = check(driver.cuMemAlloc(4), "cuMemAlloc")
    inbox = check(driver.cuMemAlloc(4 * WORDS), "cuMemAlloc")
    check(driver.cuMemsetD32(signal_word, 0, 1), "cuMemsetD32")
    check(driver.cuMemsetD32(credit_word, 1, 1), "cuMemsetD32")
    check(driver.cuCtxSynchronize(), "cuCtxSynchronize")
    done = threading.Event()
    threading.Thread(target=watchdog, args=(done,), name="step-watchdog", daemon=True).start()
    exchange(recv, signal_word, credit_word, inbox)
    done.set()
    print("exchange done (not expected: the credit read waits behind the receiver)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
