"""Clean: a CuPy stage that releases its memory pool's cached blocks before PyTorch allocates.

The same pipeline as the out-of-memory program: CuPy computes features on a worker thread in a block of
80% of the free memory, then PyTorch allocates a training buffer of 40%. Here the feature stage ends by
handing CuPy's cached blocks back to the device (get_default_memory_pool().free_all_blocks()) once its
arrays are deleted, so PyTorch's cudaMalloc finds the memory free and succeeds the first time.

Report: https://github.com/fbpic/fbpic/pull/367 -- memory kept in CuPy's memory pool is not available to
the other GPU library in the process (Numba there) and leads to out-of-memory errors; the fix forces
CuPy to release its pool.

Expected findings: none (no error, no warning; several-runtime-copies is info).

    ctxlab audit -- examples/realworld/clean_oom_cupy_pool_released_before_torch.py
Info listed after the wave-4 audit counted it: several-runtime-copies (MainThread)."""

import threading

import cupy
import torch

MiB = 1 << 20


def features(nbytes: int, out: dict) -> None:
    with cupy.cuda.Device(0):
        work = cupy.empty(nbytes, dtype=cupy.uint8)
        work[: 64 * MiB] = 1
        out["checksum"] = int(work[: 64 * MiB].sum(dtype=cupy.uint64))
        del work
        pool = cupy.get_default_memory_pool()
        pool.free_all_blocks()  # hand the cached memory back to the device
        out["pool_bytes"] = pool.total_bytes()


def main() -> int:
    torch.zeros(1, device="cuda")
    free, total = cupy.cuda.runtime.memGetInfo()
    out: dict = {}
    worker = threading.Thread(target=features, args=(int(free * 0.8) // MiB * MiB, out), name="features")
    worker.start()
    worker.join()
    want = int(free * 0.4) // MiB * MiB
    buf = torch.empty(want, dtype=torch.uint8, device="cuda")
    buf[: 64 * MiB].fill_(2)
    ok = int(buf[: 64 * MiB].sum(dtype=torch.int64).item()) == 2 * 64 * MiB
    del buf
    print(f"CuPy's pool after free_all_blocks: {out.get('pool_bytes')} bytes (checksum {out.get('checksum')}); "
          f"torch.empty of {want / 2**30:.1f} GiB succeeded, contents right: {ok}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
