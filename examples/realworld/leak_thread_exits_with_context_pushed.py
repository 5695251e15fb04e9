"""A camera worker that pushes the engine's context and returns early, so the thread ends with it pushed.

The main thread makes one context for the detection engine and hands it to a camera thread, which pushes
it for the life of its frame loop and pops it at the end. When the camera closes (a None frame) the loop
returns from the middle and the pop is skipped: the thread ends with the context still on its stack.
The main thread destroys the context after the worker has gone.

Report: https://github.com/NVIDIA/TensorRT/issues/2357 -- threads running a TensorRT engine under a
pycuda context end with "PyCUDA ERROR: The context stack was not empty upon module cleanup" when the
threads are stopped, even with ctx.pop() in the code.

Expected finding: context-leak on thread camera-0, at the line marked HAZARD in camera_loop() (the push
that no pop matches before the thread ends).

    ctxlab audit -- examples/realworld/leak_thread_exits_with_context_pushed.py
"""

import os
import sys
import threading

from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

N = 1 << 16


def camera_loop(ctx, frame_buffer, frames: list, done: list) -> None:
    check(driver.cuCtxPushCurrent(ctx), "cuCtxPushCurrent")  # HAZARD: context-leak
    for frame in frames:
        if frame is None:  # the camera closed: this return skips the pop below
            return
        check(driver.cuMemsetD32(frame_buffer, frame, N), "cuMemsetD32")
        check(driver.cuCtxSynchronize(), "cuCtxSynchronize")
        done.append(frame)
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")


def main() -> int:
    dev = device(0)
    ctx = check(driver.cuCtxCreate(None, 0, dev), "cuCtxCreate")
    frame_buffer = check(driver.cuMemAlloc(4 * N), "cuMemAlloc")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    done: list = []
    camera = threading.Thread(target=camera_loop, args=(ctx, frame_buffer, [1, 2, None, 4], done), name="camera-0")
    camera.start()
    camera.join()
    check(driver.cuCtxPushCurrent(ctx), "cuCtxPushCurrent")
    check(driver.cuMemFree(frame_buffer), "cuMemFree")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    check(driver.cuCtxDestroy(ctx), "cuCtxDestroy")
    print(f"camera-0 processed frames {done} and ended with the engine context still pushed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
