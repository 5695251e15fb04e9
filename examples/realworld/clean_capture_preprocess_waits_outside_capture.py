"""Clean: a pre-processing thread that does its device-wide work only while no CUDA graph is being captured.

The inference thread captures its step into a CUDA graph (global capture mode) on a non-blocking stream of
its own, then instantiates and replays the graph. The pre-processing thread allocates, uploads frames,
synchronises the device and frees, but every one of its CUDA calls runs under a lock that the capturing
thread holds from cudaStreamBeginCapture to cudaStreamEndCapture, so none of them falls inside the
capture, whichever thread gets the lock first.

Report: https://github.com/pytorch/pytorch/pull/63269 -- the CUDA graphs notes: no non-captured CUDA work
may run in the process, on any thread, while a capture is underway; synchronising calls are prohibited
during capture.

Expected findings: none (no error, no warning).

    ctxlab audit -- examples/realworld/clean_capture_preprocess_waits_outside_capture.py
"""

import os
import sys
import threading

import numpy as np
from cuda.bindings import runtime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check  # noqa: E402

N = 1 << 20
FRAMES = 3
H2D = runtime.cudaMemcpyKind.cudaMemcpyHostToDevice
D2H = runtime.cudaMemcpyKind.cudaMemcpyDeviceToHost


def preprocess(gpu_lock: threading.Lock, out: dict) -> None:
    frame = np.zeros(N, dtype=np.uint32)
    with gpu_lock:
        check(runtime.cudaSetDevice(0), "cudaSetDevice")
        staging = check(runtime.cudaMalloc(4 * N), "cudaMalloc")
    for _ in range(FRAMES):
        frame += 1
        with gpu_lock:  # never while the inference thread captures
            check(runtime.cudaMemcpy(staging, frame.ctypes.data, 4 * N, H2D), "cudaMemcpy")
            check(runtime.cudaDeviceSynchronize(), "cudaDeviceSynchronize")
    with gpu_lock:
        check(runtime.cudaFree(staging), "cudaFree")
    out["frames"] = FRAMES


def main() -> int:
    gpu_lock = threading.Lock()
    out: dict = {}
    with gpu_lock:
        check(runtime.cudaSetDevice(0), "cudaSetDevice")
        stream = check(runtime.cudaStreamCreateWithFlags(runtime.cudaStreamNonBlocking), "cudaStreamCreateWithFlags")
        act = check(runtime.cudaMalloc(4 * N), "cudaMalloc")
    worker = threading.Thread(target=preprocess, args=(gpu_lock, out), name="preprocess")
    worker.start()
    mode = runtime.cudaStreamCaptureMode.cudaStreamCaptureModeGlobal
    with gpu_lock:
        check(runtime.cudaStreamBeginCapture(stream, mode), "cudaStreamBeginCapture")
        check(runtime.cudaMemsetAsync(act, 3, 4 * N, stream), "cudaMemsetAsync")  # the captured step
        graph = check(runtime.cudaStreamEndCapture(stream), "cudaStreamEndCapture")
    step = check(runtime.cudaGraphInstantiate(graph, 0), "cudaGraphInstantiate")
    check(runtime.cudaGraphLaunch(step, stream), "cudaGraphLaunch")
    check(runtime.cudaStreamSynchronize(stream), "cudaStreamSynchronize")
    host = np.empty(N, dtype=np.uint32)
    check(runtime.cudaMemcpy(host.ctypes.data, act, 4 * N, D2H), "cudaMemcpy")
    worker.join()
    check(runtime.cudaGraphExecDestroy(step), "cudaGraphExecDestroy")
    check(runtime.cudaGraphDestroy(graph), "cudaGraphDestroy")
    check(runtime.cudaFree(act), "cudaFree")
    check(runtime.cudaStreamDestroy(stream), "cudaStreamDestroy")
    print(f"graph replayed, result right: {bool((host == 0x03030303).all())}; preprocess handled "
          f"{out.get('frames')} frames outside the capture")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
