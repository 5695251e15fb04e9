"""Clean: an upload stream that refills the staging buffer only after the compute kernel read the last batch.

The same batching loop as order_double_buffer_refill_while_kernel_reads.py, done right: the compute stream
records a "consumed" event after its kernel, and the upload stream waits for it before it copies the
next batch into the staging buffer, so each kernel reads the batch uploaded for it.

Report: https://github.com/Genesis-Embodied-AI/quadrants/pull/649 -- a buffer reused across launches on
different streams must not be overwritten before the kernel that reads it has finished.

Expected findings: none.

    ctxlab audit -- examples/realworld/clean_order_double_buffer_waits_consumed.py
"""

import os
import sys

import cupy
import cupyx
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _order import BLOCK, GRID, SPIN_NS, cupy_kernels  # noqa: E402

N = 4 << 20  # 4 Mi uint32 values per batch: 16 MiB


def main() -> int:
    _, spin_copy = cupy_kernels()
    upload = cupy.cuda.Stream(non_blocking=True)
    compute = cupy.cuda.Stream(non_blocking=True)
    batches = [cupyx.empty_pinned(N, dtype=np.uint32) for _ in range(2)]
    batches[0][:], batches[1][:] = 1, 2
    staging = cupy.empty(N, dtype=cupy.uint32)
    outputs = [cupy.zeros(N, dtype=cupy.uint32) for _ in range(2)]
    cupy.cuda.Stream.null.synchronize()
    staging.set(batches[0], stream=upload)
    compute.wait_event(upload.record())  # the kernel reads the uploaded batch
    with compute:
        args = (outputs[0], staging, np.uint32(N), np.uint64(SPIN_NS))
        spin_copy((GRID,), (BLOCK,), args)
    upload.wait_event(compute.record())  # the first batch is consumed before the refill
    staging.set(batches[1], stream=upload)
    compute.wait_event(upload.record())
    with compute:
        spin_copy((GRID,), (BLOCK,), (outputs[1], staging, np.uint32(N), np.uint64(0)))
    compute.synchronize()
    first = outputs[0].get()
    print(f"first output holding the first batch (1): {int((first == 1).sum())} of {N} (expected all); "
          f"holding the second batch (2): {int((first == 2).sum())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
