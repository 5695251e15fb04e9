"""Hazard green-context-on-two-threads: one green context pushed on two threads at once.

A green context is made from a group of the device's SMs (cuDevSmResourceSplitByCount,
cuDevResourceGenerateDesc, cuGreenCtxCreate) and its CUcontext taken with cuCtxFromGreenCtx. Two threads
push it, wait for each other, then both call into it and pop it. The Driver API allows a green context
current on one thread at a time; the driver accepts the second push (lab claim
migrate.green-one-thread-at-a-time), so the program runs and the audit reports the error.

    ctxlab audit -- examples/hazards/green_context_on_two_threads.py
"""

import os
import sys
import threading

from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _cuda import check, device, green_context  # noqa: E402


def main() -> int:
    ctx = green_context(device(0))
    both = threading.Barrier(2)
    out = {}

    def user(name: str) -> None:
        check(driver.cuCtxPushCurrent(ctx), "cuCtxPushCurrent")  # HAZARD: the second thread to push it
        both.wait(60)  # both threads have it current now
        (err,) = driver.cuCtxSynchronize()
        out[name] = err.name
        both.wait(60)
        check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")

    threads = [threading.Thread(target=user, args=(name,), name=name) for name in ("first", "second")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"cuCtxSynchronize in the green context on both threads at once: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
