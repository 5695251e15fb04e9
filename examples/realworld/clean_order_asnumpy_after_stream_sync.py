"""Clean: scores computed on a non-blocking stream and downloaded after that stream is synchronised.

The same scoring step as order_asnumpy_null_stream_before_side_stream.py, done right: the scoring stream
is synchronised before cupy.asnumpy copies the scores on the null stream, so the host reads the scores
the kernel wrote.

Report: https://github.com/cupy/cupy/issues/6104 -- work on a non-blocking stream is not ordered with the
legacy default stream: synchronise the stream (or copy on it) before reading its results.

Expected findings: none.

    ctxlab audit -- examples/realworld/clean_order_asnumpy_after_stream_sync.py
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
        spin_fill((GRID,), (BLOCK,), args)
    scoring.synchronize()  # the scores are written before the host reads them
    host = cupy.asnumpy(scores)
    print(f"scores read equal to 5: {int((host == 5).sum())} of {N} (expected all); still 0: {int((host == 0).sum())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
