"""A watchdog thread that destroys a slow worker's context to "reset" it, while the worker still has it current.

The worker makes its context, launches a long fill and waits. A watchdog thread, given the worker's
context when the job started, decides the job hung and destroys the context to free the GPU. The worker
then synchronises: its context is still current on its thread, destroyed, and cuCtxSynchronize returns
CUDA_ERROR_CONTEXT_IS_DESTROYED.

Report: https://github.com/Rust-GPU/rust-cuda/issues/21 -- dropping (destroying) a context while another
thread is using it destroys its memory and resources under that thread; the driver's context handling is
per thread and does not protect the other user.

Expected finding: destroyed-while-current on thread worker, at the line marked HAZARD in work() (the
destroy on thread watchdog is the line marked DESTROY; the program catches the status and prints it).

    ctxlab audit -- examples/realworld/destroyed_by_watchdog.py
"""

import os
import sys
import threading

from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

N = 1 << 24


def work(dev, started: threading.Event, killed: threading.Event, out: dict) -> None:
    out["ctx"] = check(driver.cuCtxCreate(None, 0, dev), "cuCtxCreate")
    buffer = check(driver.cuMemAlloc(4 * N), "cuMemAlloc")
    check(driver.cuMemsetD32Async(buffer, 1, N, driver.CUstream(0)), "cuMemsetD32Async")
    started.set()
    killed.wait(60)
    (err,) = driver.cuCtxSynchronize()  # HAZARD: destroyed-while-current
    out["sync"] = err.name
    out["pop"] = driver.cuCtxPopCurrent()[0].name


def watchdog(started: threading.Event, killed: threading.Event, out: dict) -> None:
    started.wait(60)
    (err,) = driver.cuCtxDestroy(out["ctx"])  # DESTROY: the watchdog "resets" the hung job
    out["destroy"] = err.name
    killed.set()


def main() -> int:
    dev = device(0)
    started, killed, out = threading.Event(), threading.Event(), {}
    threads = [threading.Thread(target=work, args=(dev, started, killed, out), name="worker"),
               threading.Thread(target=watchdog, args=(started, killed, out), name="watchdog")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"cuCtxDestroy on watchdog: {out['destroy']}; then on worker cuCtxSynchronize: {out['sync']}, "
          f"cuCtxPopCurrent: {out['pop']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
