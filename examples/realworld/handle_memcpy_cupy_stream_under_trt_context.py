"""A TensorRT-style worker that copies its input on a CuPy stream while its own engine context is current.

CuPy does the pre-processing in the primary context and creates its non-blocking streams at start-up.
The inference worker pushes the engine's context (made with cuCtxCreate, as pycuda's make_context() does)
and uploads the frame into the engine's input buffer with cuMemcpyHtoDAsync on one of CuPy's streams,
a stream of the primary context, not of the context current on the thread.

Report: https://github.com/cupy/cupy/issues/4618 -- an application whose TensorRT engine pushes and pops
its own pycuda context gets cudaErrorInvalidResourceHandle from CuPy streams created outside it.

Expected finding: handle-from-another-context on thread trt-worker, at the line marked HAZARD in
upload() (the cuMemcpyHtoDAsync; the program catches the status and prints it).

    ctxlab audit -- examples/realworld/handle_memcpy_cupy_stream_under_trt_context.py
"""

import os
import sys
import threading

import cupy
import numpy as np
from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402


def upload(engine_ctx, stream_ptr: int, frame: np.ndarray, out: dict) -> None:
    check(driver.cuCtxPushCurrent(engine_ctx), "cuCtxPushCurrent")
    try:
        size, host = frame.nbytes, frame.ctypes.data
        binding = check(driver.cuMemAlloc(size), "cuMemAlloc")
        stream = driver.CUstream(stream_ptr)
        (err,) = driver.cuMemcpyHtoDAsync(binding, host, size, stream)  # HAZARD: handle-from-another-context
        out["copy"] = err.name
        check(driver.cuCtxSynchronize(), "cuCtxSynchronize")
        check(driver.cuMemFree(binding), "cuMemFree")
    finally:
        check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")


def main() -> int:
    cupy.cuda.Device(0).use()
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]  # primary context
    with streams[0]:
        frame = cupy.asnumpy(cupy.arange(720 * 1280, dtype=cupy.float32).reshape(720, 1280) / 255.0)
    dev = device(0)
    engine_ctx = check(driver.cuCtxCreate(None, 0, dev), "cuCtxCreate")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    out: dict = {}
    worker = threading.Thread(target=upload, args=(engine_ctx, streams[1].ptr, frame, out), name="trt-worker")
    worker.start()
    worker.join()
    check(driver.cuCtxDestroy(engine_ctx), "cuCtxDestroy")
    print(f"cuMemcpyHtoDAsync on CuPy's stream under the engine context: {out['copy']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
