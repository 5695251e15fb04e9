"""Scores computed on a non-blocking stream and downloaded with cupy.asnumpy after its block, on the null stream.

A scoring step runs its kernel (long: it waits 50 ms on the GPU clock before it writes the scores) on its
own non-blocking stream inside `with stream:`. After the block the current stream is the null stream
again, and cupy.asnumpy copies the scores there and synchronises the null stream -- but the legacy null
stream does not wait for a non-blocking stream, so the copy reads the scores before the kernel wrote
them. No call fails; the program prints the scores read and the ones expected.

Report: https://github.com/cupy/cupy/issues/6104 -- results "random" when the CuPy stream is created with
cp.cuda.Stream(non_blocking=True) "while the code works perfectly when using non_blocking=False": work
on a non-blocking stream is not ordered with the legacy default stream.

Expected finding: unordered-access on thread MainThread, at the line marked HAZARD in main() (the
cupy.asnumpy, a host read); its cause is the scoring kernel's launch on the other stream, the line marked
CAUSE.

    ctxlab audit -- examples/realworld/order_asnumpy_null_stream_before_side_stream.py
"""

import os
import sys

import cupy
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _order import BLOCK, GRID, SPIN_NS, cupy_kernels  # noqa: E402

N = 4 << 20  # 4 Mi uint32 scores: 16 MiB


def main() -> int:
    spin_fill, _ = cupy_kernels()
    scoring = cupy.cuda.Stream(non_blocking=True)
    scores = cupy.zeros(N, dtype=cupy.uint32)
    cupy.cuda.Stream.null.synchronize()
    with scoring:
        args = (scores, np.uint32(N), np.uint32(5), np.uint64(SPIN_NS))
        spin_fill((GRID,), (BLOCK,), args)  # CAUSE: unordered-access
    host = cupy.asnumpy(scores)  # HAZARD: unordered-access
    scoring.synchronize()
    print(f"scores read equal to 5: {int((host == 5).sum())} of {N} (expected all); still 0: {int((host == 0).sum())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
