"""Hazard no-context: a driver call on a thread that never had a context.

The main thread initialises the runtime (CuPy's cudaSetDevice binds the primary context there); a
second thread calls cuMemAlloc before anything made a context current on it: the driver answers
CUDA_ERROR_INVALID_CONTEXT (lab claim migrate.driver-call-without-context).

    ctxlab audit -- examples/hazards/no_context.py
"""

import threading

import cupy
from cuda.bindings import driver


def main() -> int:
    cupy.cuda.runtime.setDevice(0)
    out = {}

    def stranger() -> None:
        err, _ = driver.cuMemAlloc(256)  # HAZARD: no context was ever current on this thread
        out["status"] = err.name

    thread = threading.Thread(target=stranger, name="stranger")
    thread.start()
    thread.join()
    print(f"cuMemAlloc on a thread without a context: {out['status']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
