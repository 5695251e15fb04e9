"""A render stream that waits for the decoder's event, which the decoder never records: the wait orders nothing.

A decode stage owns a stream and a "done" event, created once. After queueing its decode kernel (long: it
waits 50 ms on the GPU clock before it writes the frames) it calls stream.record() -- which, given no
event, records a new event and returns it, so the stage's own done event is never recorded. The render
stream then waits for that done event: a wait on an event never recorded completes at once, so the
render kernel reads the frames before the decoder has written them. No call fails; the program prints
the pixels rendered and the ones expected.

Report: https://github.com/NVIDIA/cuda-python/pull/559 -- a stream told to wait for an event that was
never recorded: the work queued after that wait was expected never to complete, yet the test "will
randomly fail (... completes without error)", because the wait does not wait.

Expected findings: wait-orders-nothing on thread MainThread, at the line marked HAZARD: wait-orders-nothing
in main() (the wait_event), its cause the event's creation in DecodeStage.__init__ (the line marked CAUSE:
wait-orders-nothing); and unordered-access on thread MainThread at the render kernel that reads the frames
(the line marked HAZARD: unordered-access), its cause the decode kernel's launch (the line marked CAUSE:
unordered-access).

    ctxlab audit -- examples/realworld/order_cupy_wait_event_never_recorded.py
"""

import os
import sys

import cupy
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _order import BLOCK, GRID, SPIN_NS, cupy_kernels  # noqa: E402

N = 4 << 20  # 4 Mi uint32 pixels: 16 MiB


class DecodeStage:
    """A decoder with its own stream and the event that says its frames are written."""

    def __init__(self, kernel) -> None:
        self.kernel = kernel
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.done = cupy.cuda.Event()  # CAUSE: wait-orders-nothing

    def decode(self, frames) -> None:
        with self.stream:
            args = (frames, np.uint32(N), np.uint32(5), np.uint64(SPIN_NS))
            self.kernel((GRID,), (BLOCK,), args)  # CAUSE: unordered-access
        self.stream.record()  # records a new event, not self.done


def main() -> int:
    spin_fill, _ = cupy_kernels()
    stage = DecodeStage(spin_fill)
    frames = cupy.zeros(N, dtype=cupy.uint32)
    render = cupy.cuda.Stream(non_blocking=True)
    cupy.cuda.Stream.null.synchronize()
    stage.decode(frames)
    render.wait_event(stage.done)  # HAZARD: wait-orders-nothing
    with render:
        pixels = frames * 2  # HAZARD: unordered-access
    render.synchronize()
    got = pixels.get()
    stage.stream.synchronize()
    print(f"pixels rendered from decoded frames (10): {int((got == 10).sum())} of {N} (expected all); "
          f"from frames not yet decoded (0): {int((got == 0).sum())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
