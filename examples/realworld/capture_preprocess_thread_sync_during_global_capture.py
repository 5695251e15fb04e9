"""A pre-processing thread that synchronises the device while the inference thread captures a CUDA graph.

The inference thread (the main thread) captures its step into a CUDA graph: cudaStreamBeginCapture on a
non-blocking stream of its own, in cudaStreamCaptureModeGlobal, the default mode. Meanwhile the
pre-processing thread finishes a frame and calls cudaDeviceSynchronize to wait for the GPU before it
reuses its staging buffer. In global mode such a call from any thread is not permitted while a capture
is underway: it fails with cudaErrorStreamCaptureUnsupported (900, "operation not permitted when stream
is capturing") and invalidates the capture, so the inference thread's cudaStreamEndCapture fails as well
(cudaErrorStreamCaptureInvalidated, 901) and returns no graph. Events order the two threads so that the
synchronise falls inside the capture on every run.

Report: https://github.com/NVIDIA/TensorRT/issues/2888 -- with several CPU threads on one GPU, a
pre-processing thread's cudaDeviceSynchronize fails with code 900 (cudaErrorStreamCaptureUnsupported) and
breaks the CUDA graph another thread is capturing.

Expected finding: capture-violation on thread preprocess, at the line marked HAZARD in preprocess() (the
cudaDeviceSynchronize during the other thread's capture); the failed cudaStreamEndCapture on MainThread
follows from it. The program prints both statuses.

    ctxlab audit -- examples/realworld/capture_preprocess_thread_sync_during_global_capture.py
"""

import os
import sys
import threading

import numpy as np
from cuda.bindings import runtime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check  # noqa: E402

N = 1 << 20
H2D = runtime.cudaMemcpyKind.cudaMemcpyHostToDevice


def preprocess(ready: threading.Event, capturing: threading.Event, done: threading.Event,
               ended: threading.Event, out: dict) -> None:
    check(runtime.cudaSetDevice(0), "cudaSetDevice")
    staging = check(runtime.cudaMalloc(4 * N), "cudaMalloc")
    frame = np.arange(N, dtype=np.uint32)
    try:
        check(runtime.cudaMemcpy(staging, frame.ctypes.data, 4 * N, H2D), "cudaMemcpy")  # frame 0
        check(runtime.cudaDeviceSynchronize(), "cudaDeviceSynchronize")
        ready.set()
        capturing.wait()
        frame += 1  # frame 1: wait for the GPU before reusing the staging buffer
        (err,) = runtime.cudaDeviceSynchronize()  # HAZARD: capture-violation
        out["sync"] = err.name
    finally:
        done.set()
    ended.wait()  # free the staging buffer only once no capture is underway
    check(runtime.cudaFree(staging), "cudaFree")


def main() -> int:
    check(runtime.cudaSetDevice(0), "cudaSetDevice")
    stream = check(runtime.cudaStreamCreateWithFlags(runtime.cudaStreamNonBlocking), "cudaStreamCreateWithFlags")
    act = check(runtime.cudaMalloc(4 * N), "cudaMalloc")
    check(runtime.cudaDeviceSynchronize(), "cudaDeviceSynchronize")
    ready, capturing, done, ended = (threading.Event() for _ in range(4))
    out: dict = {}
    worker = threading.Thread(target=preprocess, args=(ready, capturing, done, ended, out), name="preprocess")
    worker.start()
    ready.wait()
    mode = runtime.cudaStreamCaptureMode.cudaStreamCaptureModeGlobal
    check(runtime.cudaStreamBeginCapture(stream, mode), "cudaStreamBeginCapture")
    (err,) = runtime.cudaMemsetAsync(act, 0, 4 * N, stream)  # the captured step
    out["memset"] = err.name
    capturing.set()
    done.wait()
    err, graph = runtime.cudaStreamEndCapture(stream)
    out["end"] = err.name
    ended.set()
    worker.join()
    if err == runtime.cudaError_t.cudaSuccess:
        check(runtime.cudaGraphDestroy(graph), "cudaGraphDestroy")
    check(runtime.cudaFree(act), "cudaFree")
    check(runtime.cudaStreamDestroy(stream), "cudaStreamDestroy")
    print(f"captured memset: {out.get('memset')}; preprocess's cudaDeviceSynchronize during the capture: "
          f"{out.get('sync')}; cudaStreamEndCapture: {out.get('end')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
