"""A CuPy array dropped while a kernel on another stream still reads it, and its pool block handed out again.

A feature stage allocates its features on the stage's own non-blocking stream, so CuPy's memory pool
files the block under that stream. A scoring stream waits for the features (an event: the read is ordered
after the write) and launches a long kernel that copies them into the scores (it waits 50 ms on the GPU
clock first). The stage then drops its reference to the features: the block goes back to the pool of the
stage's stream, which knows nothing of the scoring stream's kernel, and the stage's next allocation of the
same size gets the same block and fills it with 9 while the scoring kernel has not read it yet. No call
fails; the program prints the scores read and the ones expected.

Report: https://github.com/cupy/cupy/issues/8068 -- "if memory is allocated on stream A and then passed to
a kernel to be executed on stream B, the memory chunk should not be reused until the kernel finishes in
stream B. However, it is impossible for users to declare such dependencies; race conditions may happen if
the user destructs the ndarray object."

Expected finding: freed-while-in-use on thread MainThread, at the line marked HAZARD in main() (the del of
the features, CuPy's pool free); its cause is the scoring kernel's launch on the other stream, the line
marked CAUSE.

    ctxlab audit -- examples/realworld/order_cupy_pool_del_while_side_stream_reads.py
"""

import os
import sys

import cupy
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _order import BLOCK, GRID, SPIN_NS, cupy_kernels  # noqa: E402

N = 4 << 20  # 4 Mi uint32 values: 16 MiB


def main() -> int:
    _, spin_copy = cupy_kernels()
    stage = cupy.cuda.Stream(non_blocking=True)
    scoring = cupy.cuda.Stream(non_blocking=True)
    with stage:
        features = cupy.full(N, 1, dtype=cupy.uint32)  # the pool files the block under the stage's stream
    block = features.data.ptr
    scores = cupy.zeros(N, dtype=cupy.uint32)
    cupy.cuda.Stream.null.synchronize()
    scoring.wait_event(stage.record())  # the features are written before the scoring stream reads them
    with scoring:
        spin_copy((GRID,), (BLOCK,), (scores, features, np.uint32(N), np.uint64(SPIN_NS)))  # CAUSE: freed-while-in-use
    del features  # HAZARD: freed-while-in-use
    with stage:
        next_batch = cupy.full(N, 9, dtype=cupy.uint32)  # same size, same stream: the same block
    scoring.synchronize()
    stage.synchronize()
    got = scores.get()
    print(f"next batch reuses the block: {next_batch.data.ptr == block}; scores equal to 1: {int((got == 1).sum())} "
          f"of {N} (expected {N}); equal to the next batch's 9: {int((got == 9).sum())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
