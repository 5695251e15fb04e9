"""Clean: a CuPy array dropped only after its allocating stream waits for the other stream's kernel.

The same feature stage as order_cupy_pool_del_while_side_stream_reads.py, done right: before dropping
the features, the stage's stream waits for an event recorded on the scoring stream after its kernel (the
stream order CuPy asks users to declare with Stream.wait_event). The block goes back to the pool of the
stage's stream, and the stage's next allocation and fill on that stream run after the scoring kernel has
read the features.

Report: https://github.com/cupy/cupy/issues/8068 -- CuPy's answer to cross-stream use of pool memory: the
user declares the stream order with Stream.wait_event before the memory can be reused.

Expected findings: none.

    ctxlab audit -- examples/realworld/clean_order_cupy_pool_del_after_event.py
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
        spin_copy((GRID,), (BLOCK,), (scores, features, np.uint32(N), np.uint64(SPIN_NS)))
    stage.wait_event(scoring.record())  # the stage's stream is ordered after the scoring kernel
    del features
    with stage:
        next_batch = cupy.full(N, 9, dtype=cupy.uint32)  # same size, same stream: the same block
    scoring.synchronize()
    stage.synchronize()
    got = scores.get()
    print(f"next batch reuses the block: {next_batch.data.ptr == block}; scores equal to 1: {int((got == 1).sum())} "
          f"of {N} ; equal to the next batch's 9: {int((got == 9).sum())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
