"""A frame-writer thread that reads a page-locked frame after the engine destroyed the context it came from.

A reconstruction engine makes a context of its own (cuCtxCreate, pycuda-style), computes each frame on
the GPU and downloads it into page-locked host memory (cuMemHostAlloc) so that the copy is fast. It hands
numpy views of those frames to a writer thread that saves them to disk. When the run ends, engine.close()
destroys its context; a context's page-locked allocations go with it, and their pages are unmapped. The
writer, one frame behind, then reads the last frame through its numpy view: the first read of an unmapped
page is a segmentation fault, in numpy, on thread frame-writer. No CUDA call reports anything.

Report: https://github.com/ptycho/ptypy/pull/520 -- consecutive pycuda engines, each making and destroying
a context of its own, end in "Caught signal 11 (Segmentation fault: invalid permissions for mapped
object)"; the fix keeps one (primary) context for the whole reconstruction.

Expected finding: program-crashed on thread frame-writer, at the line marked HAZARD in write_frames() (the
numpy read of the frame; the cuCtxDestroy on MainThread that freed it is the line marked DESTROY in
Engine.close()). Ends by SIGSEGV.

    ctxlab audit -- examples/realworld/crash_pinned_frame_read_after_engine_context_destroyed.py
"""

import ctypes
import os
import queue
import sys
import threading

import numpy as np
from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

FRAME = 1 << 20  # float32 values per frame
FRAMES = 3


class Engine:
    def __init__(self, dev) -> None:
        self.ctx = check(driver.cuCtxCreate(None, 0, dev), "cuCtxCreate")
        self.result = check(driver.cuMemAlloc(4 * FRAME), "cuMemAlloc")
        self.pinned = []

    def frame(self, i: int) -> np.ndarray:
        """Compute frame i (a memset stands for the kernel) and download it into page-locked memory."""
        host = check(driver.cuMemHostAlloc(4 * FRAME, 0), "cuMemHostAlloc")
        self.pinned.append(host)
        value = np.array(float(i + 1), dtype=np.float32).view(np.uint32)
        check(driver.cuMemsetD32(self.result, int(value), FRAME), "cuMemsetD32")
        check(driver.cuMemcpyDtoH(host, self.result, 4 * FRAME), "cuMemcpyDtoH")
        return np.ctypeslib.as_array((ctypes.c_float * FRAME).from_address(int(host)))

    def close(self) -> None:
        check(driver.cuMemFree(self.result), "cuMemFree")
        check(driver.cuCtxDestroy(self.ctx), "cuCtxDestroy")  # DESTROY: frees the page-locked frames too


def write_frames(frames: queue.Queue, written: threading.Semaphore, closed: threading.Event) -> None:
    while (item := frames.get()) is not None:
        i, frame = item
        if i == FRAMES - 1:
            closed.wait(60)  # the writer falls behind on the last frame
        total = float(frame.sum())  # HAZARD: program-crashed
        print(f"frame-writer: frame {i} saved (sum {total:.0f})", flush=True)
        written.release()


def main() -> int:
    engine = Engine(device(0))
    frames, written, closed = queue.Queue(), threading.Semaphore(0), threading.Event()
    writer = threading.Thread(target=write_frames, args=(frames, written, closed), name="frame-writer")
    writer.start()
    for i in range(FRAMES):
        frames.put((i, engine.frame(i)))
        if i < FRAMES - 1:
            written.acquire(timeout=60)
    frames.put(None)
    print("run finished; closing the engine", flush=True)
    engine.close()
    closed.set()
    writer.join()
    print("all frames written (not expected: the writer crashes on the last frame)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
