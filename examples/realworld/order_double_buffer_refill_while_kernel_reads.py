"""An upload stream that refills the one staging buffer while the compute stream's kernel still reads the last batch.

A batching loop uploads each batch into one device staging buffer on an upload stream; the compute
stream waits for the upload (an event) and launches its kernel (long: it waits 50 ms on the GPU clock
before it reads the staging buffer). The loop then uploads the next batch into the same staging buffer at
once, without waiting for an event recorded after the compute kernel: the copy overwrites the first
batch before the kernel has read it, and the first batch's output holds the second batch. No call fails;
the program prints what the first output holds and what it should.

Report: https://github.com/Genesis-Embodied-AI/quadrants/pull/649 -- a persistent argument buffer reused
across launches on different streams: "the second call's memcpy can overwrite the buffer while the first
kernel is still reading it, causing data corruption".

Expected finding: unordered-access on thread MainThread, at the line marked HAZARD in main() (the second
upload into the staging buffer, a write while the kernel on the compute stream may still read it); its
cause is the compute kernel's launch, the line marked CAUSE.

    ctxlab audit -- examples/realworld/order_double_buffer_refill_while_kernel_reads.py
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
        spin_copy((GRID,), (BLOCK,), args)  # CAUSE: unordered-access
    staging.set(batches[1], stream=upload)  # HAZARD: unordered-access
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
