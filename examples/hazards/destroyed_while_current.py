"""Hazard destroyed-while-current: a context destroyed by one thread while current on another.

The main thread makes a context and hands it to thread "holder", which pushes it; the main thread
destroys it; holder's next call into it returns CUDA_ERROR_CONTEXT_IS_DESTROYED (lab claim
refcount.destroy-while-current-elsewhere).

    ctxlab audit -- examples/hazards/destroyed_while_current.py
"""

import os
import sys
import threading

from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _cuda import check, create_context, device  # noqa: E402


def main() -> int:
    ctx = create_context(device(0))
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    pushed, destroyed = threading.Event(), threading.Event()
    out = {}

    def holder() -> None:
        check(driver.cuCtxPushCurrent(ctx), "cuCtxPushCurrent")
        pushed.set()
        destroyed.wait(60)
        (err,) = driver.cuCtxSynchronize()  # HAZARD: the context was destroyed while current here
        out["synchronize"] = err.name

    thread = threading.Thread(target=holder, name="holder")
    thread.start()
    pushed.wait(60)
    (err,) = driver.cuCtxDestroy(ctx)  # DESTROY: while current on holder
    out["destroy"] = err.name
    destroyed.set()
    thread.join()
    print(f"cuCtxDestroy on MainThread: {out['destroy']}; then cuCtxSynchronize on holder: {out['synchronize']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
