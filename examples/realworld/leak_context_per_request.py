"""An inference server that builds an engine with a context of its own for each request and never destroys it.

The request handler runs on a worker thread. Like the pycuda/TensorRT code it was written from, each
engine makes a context (cuCtxCreate, pycuda's Device(0).make_context()), allocates its buffers in it, and
pops it off the thread once loaded; inference pushes and pops it around the work. When the request is
done the engine object is dropped, but nothing destroys its context: the context, its buffers and its
share of GPU memory stay until the process ends.

Report: https://github.com/NVIDIA/TensorRT/issues/1107 -- a multi-threaded TensorRT server whose engines
make their own contexts ends with "PyCUDA ERROR: The context stack was not empty upon module cleanup";
the contexts were never cleaned up.

Expected finding: context-leak on thread request-worker, at the line marked HAZARD in Engine.__init__()
(the cuCtxCreate whose context is never destroyed).

    ctxlab audit -- examples/realworld/leak_context_per_request.py
"""

import os
import sys
import threading

import numpy as np
from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

N = 1 << 16


class Engine:
    def __init__(self, dev) -> None:
        err, self.ctx = driver.cuCtxCreate(None, 0, dev)  # HAZARD: context-leak
        check((err,), "cuCtxCreate")
        self.output = check(driver.cuMemAlloc(4 * N), "cuMemAlloc")
        check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")

    def infer(self, value: int) -> int:
        check(driver.cuCtxPushCurrent(self.ctx), "cuCtxPushCurrent")
        try:
            check(driver.cuMemsetD32(self.output, value, N), "cuMemsetD32")
            host = np.empty(N, dtype=np.uint32)
            check(driver.cuMemcpyDtoH(host.ctypes.data, self.output, 4 * N), "cuMemcpyDtoH")
            return int(host.sum())
        finally:
            check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")


def handle_request(dev, value: int, out: dict) -> None:
    engine = Engine(dev)  # one engine per request; dropped at the end of the request, its context is not
    out["result"] = engine.infer(value)


def main() -> int:
    dev = device(0)
    out: dict = {}
    worker = threading.Thread(target=handle_request, args=(dev, 3, out), name="request-worker")
    worker.start()
    worker.join()
    print(f"request served: {out['result']} (expected {3 * N}); its engine's context was never destroyed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
