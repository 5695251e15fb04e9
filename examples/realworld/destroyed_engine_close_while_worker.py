"""An engine whose close() destroys its context while the inference worker still has it current.

The engine makes one context and a worker thread that pushes it once and serves requests from a queue.
At shutdown the main thread calls engine.close(), which destroys the context, and then posts the last
queued request. cuCtxDestroy does not unbind the context from the worker: it stays current there, and
the worker's next call into it returns CUDA_ERROR_CONTEXT_IS_DESTROYED.

Report: https://github.com/intel/llvm/issues/4171 -- a context is destroyed (and popped) in the main
thread while it is still current in a second thread, as the cuCtxDestroy spec spells out: invalid memory
accesses in a multithreaded application with several contexts.

Expected finding: destroyed-while-current on thread infer-worker, at the line marked HAZARD in serve()
(the destroy on MainThread is the line marked DESTROY; the program catches the status and prints it).

    ctxlab audit -- examples/realworld/destroyed_engine_close_while_worker.py
"""

import os
import queue
import sys
import threading

from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402


def serve(ctx, requests: queue.Queue, served: threading.Event, results: list) -> None:
    check(driver.cuCtxPushCurrent(ctx), "cuCtxPushCurrent")
    while (nbytes := requests.get()) is not None:
        err, ptr = driver.cuMemAlloc(nbytes)  # HAZARD: destroyed-while-current
        results.append(err.name)
        if not int(err):
            check(driver.cuMemFree(ptr), "cuMemFree")
        served.set()
    err, _ = driver.cuCtxPopCurrent()
    results.append(f"pop {err.name}")


def main() -> int:
    ctx = check(driver.cuCtxCreate(None, 0, device(0)), "cuCtxCreate")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    requests: queue.Queue = queue.Queue()
    served, results = threading.Event(), []
    worker = threading.Thread(target=serve, args=(ctx, requests, served, results), name="infer-worker")
    worker.start()
    requests.put(1 << 20)
    served.wait(60)
    (err,) = driver.cuCtxDestroy(ctx)  # DESTROY: engine.close() while infer-worker has it current
    requests.put(1 << 20)
    requests.put(None)
    worker.join()
    print(f"cuCtxDestroy: {err.name}; infer-worker's calls: {results}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
