"""A tracker backend that pushes its new context a second time and pops it once, so its thread ends with it.

The backend makes a context (cuCtxCreate, like pycuda's make_context(), already pushes it) and then, as in
the report, pushes it again "to make sure it is current". Its close() pops once. The tracker thread ends
with the context still current, one push deep; the main thread destroys the context afterwards.

Report: https://github.com/GeekAlexis/FastMOT/issues/65 -- an InferenceBackend does
cuda.Device(0).make_context() followed by cuda_ctx.push(); multi-threaded use then fails
("invalid resource handle"). https://github.com/jkjung-avt/tensorrt_demos/issues/148 gives the rule:
one pop() for each push().

Expected finding: context-leak on thread tracker, at the line marked HAZARD in Backend.__init__() (the
second push, which no pop matches).

    ctxlab audit -- examples/realworld/leak_pushed_twice_popped_once.py
"""

import os
import sys
import threading

import numpy as np
from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

N = 4096


class Backend:
    def __init__(self, dev) -> None:
        self.ctx = check(driver.cuCtxCreate(None, 0, dev), "cuCtxCreate")  # current: pushed once
        check(driver.cuCtxPushCurrent(self.ctx), "cuCtxPushCurrent")  # HAZARD: context-leak
        self.scores = check(driver.cuMemAlloc(4 * N), "cuMemAlloc")

    def infer(self, label: int) -> int:
        check(driver.cuMemsetD32(self.scores, label, N), "cuMemsetD32")
        host = np.empty(N, dtype=np.uint32)
        check(driver.cuMemcpyDtoH(host.ctypes.data, self.scores, 4 * N), "cuMemcpyDtoH")
        return int(host[0])

    def close(self) -> None:
        check(driver.cuMemFree(self.scores), "cuMemFree")
        check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")  # one pop for two pushes


def track(dev, out: dict) -> None:
    backend = Backend(dev)
    out["labels"] = [backend.infer(label) for label in (5, 6, 7)]
    backend.close()
    out["ctx"] = backend.ctx
    current = check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    out["still_current"] = int(current) == int(backend.ctx)


def main() -> int:
    dev = device(0)
    out: dict = {}
    tracker = threading.Thread(target=track, args=(dev, out), name="tracker")
    tracker.start()
    tracker.join()
    check(driver.cuCtxDestroy(out["ctx"]), "cuCtxDestroy")
    print(f"tracker labels {out['labels']}; context still current on tracker after close(): {out['still_current']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
