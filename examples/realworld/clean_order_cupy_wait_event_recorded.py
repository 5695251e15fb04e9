"""Clean: a render stream that waits for the decoder's event, recorded on the decode stream after its kernel.

The same decode stage as order_cupy_wait_event_never_recorded.py, done right: the stage records its own
done event with stream.record(self.done) after queueing the decode kernel, so the render stream's
wait_event orders the render kernel after the decode, and the pixels come from decoded frames.

Report: https://github.com/NVIDIA/cuda-python/pull/559 -- a wait orders work only after an event that
was recorded: record the event on the producer's stream before another stream waits for it.

Expected findings: none.

    ctxlab audit -- examples/realworld/clean_order_cupy_wait_event_recorded.py
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
        self.done = cupy.cuda.Event()

    def decode(self, frames) -> None:
        with self.stream:
            args = (frames, np.uint32(N), np.uint32(5), np.uint64(SPIN_NS))
            self.kernel((GRID,), (BLOCK,), args)
        self.stream.record(self.done)  # the stage's own event, recorded after the kernel


def main() -> int:
    spin_fill, _ = cupy_kernels()
    stage = DecodeStage(spin_fill)
    frames = cupy.zeros(N, dtype=cupy.uint32)
    render = cupy.cuda.Stream(non_blocking=True)
    cupy.cuda.Stream.null.synchronize()
    stage.decode(frames)
    render.wait_event(stage.done)
    with render:
        pixels = frames * 2
    render.synchronize()
    got = pixels.get()
    stage.stream.synchronize()
    print(f"pixels rendered from decoded frames (10): {int((got == 10).sum())} of {N} (expected all); "
          f"from frames not yet decoded (0): {int((got == 0).sum())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
