"""A PyTorch allocation that runs out of memory while CuPy's memory pool still holds what CuPy freed.

A pipeline computes its features with CuPy on a worker thread, then trains with PyTorch. The CuPy arrays
are deleted when the features are done, but CuPy's default memory pool keeps their memory cached for
reuse (it does not cudaFree it), so the device still has only the rest free. PyTorch's caching
allocator knows nothing of CuPy's cache: its cudaMalloc for the training buffer fails, and torch.empty
raises torch.OutOfMemoryError, which the program catches and prints. It then releases CuPy's cached
blocks (free_all_blocks) and makes the same allocation again, which succeeds: the memory was CuPy's.

Sizes come from the free memory cupy.cuda.runtime.memGetInfo reports once PyTorch is initialised: CuPy
takes 80% of it (about 110 GiB on a 139 GiB H200), PyTorch then asks for 40%.

Report: https://github.com/microsoft/skala/pull/96 -- out-of-memory errors on an 80 GB A100 because CuPy
and PyTorch each keep a memory pool of their own and eat into each other's memory; sharing one pool
fixes them.

Expected finding: out-of-memory on thread MainThread, at the line marked HAZARD in main() (the
torch.empty that fails while CuPy's pool holds the memory).

    ctxlab audit -- examples/realworld/oom_torch_alloc_while_cupy_pool_holds_memory.py
Info listed after the wave-4 audit counted it: several-runtime-copies (MainThread)."""

import threading

import cupy
import torch

MiB = 1 << 20


def features(nbytes: int, out: dict) -> None:
    with cupy.cuda.Device(0):
        work = cupy.empty(nbytes, dtype=cupy.uint8)  # the feature buffers, all in one block
        work[: 64 * MiB] = 1
        out["checksum"] = int(work[: 64 * MiB].sum(dtype=cupy.uint64))
        del work  # back to CuPy's pool, not to the device
        out["pool_bytes"] = cupy.get_default_memory_pool().total_bytes()


def main() -> int:
    torch.zeros(1, device="cuda")  # PyTorch's context and allocator first
    free, total = cupy.cuda.runtime.memGetInfo()
    out: dict = {}
    worker = threading.Thread(target=features, args=(int(free * 0.8) // MiB * MiB, out), name="features")
    worker.start()
    worker.join()
    want = int(free * 0.4) // MiB * MiB
    try:
        buf = torch.empty(want, dtype=torch.uint8, device="cuda")  # HAZARD: out-of-memory
        status = "allocated"
        del buf
    except torch.OutOfMemoryError as exc:
        status = "torch.OutOfMemoryError: " + str(exc).strip().splitlines()[0][:160]
    cupy.get_default_memory_pool().free_all_blocks()
    retry = torch.empty(want, dtype=torch.uint8, device="cuda")
    del retry
    print(f"free at start {free / 2**30:.1f} GiB of {total / 2**30:.1f} GiB; CuPy's pool kept "
          f"{out.get('pool_bytes', 0) / 2**30:.1f} GiB after its arrays were deleted (checksum {out.get('checksum')})")
    print(f"torch.empty of {want / 2**30:.1f} GiB: {status}")
    print("after free_all_blocks the same torch.empty succeeded")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
