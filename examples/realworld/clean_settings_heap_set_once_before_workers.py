"""Clean: the same geometry loader done right: the malloc heap limit is raised once, on the main thread, before
any worker starts and before any kernel runs; the workers only launch the kernel that mallocs (each on its own
stream), and nobody sets the limit again, so every worker's 16 MiB device malloc succeeds.

Reports: https://github.com/cupy/cupy/issues/8693 (the heap limit set through cupy.cuda.runtime.deviceSetLimit)
and https://github.com/celeritas-project/celeritas/pull/554 (resize the heap before loading a large geometry).

Expected findings: none.

    ctxlab audit -- examples/realworld/clean_settings_heap_set_once_before_workers.py
"""

import threading

import cupy

HEAP = cupy.cuda.runtime.cudaLimitMallocHeapSize
SOURCE = r"""
extern "C" __global__ void load_geometry(unsigned long long bytes, int *loaded) {
    char *scratch = (char *)malloc(bytes);
    loaded[0] = scratch != 0;
    if (scratch) { scratch[0] = 1; free(scratch); }
}
"""


def worker(kernel, results: list, index: int) -> None:
    cupy.cuda.Device(0).use()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        loaded = cupy.zeros(1, dtype=cupy.int32)
        kernel((1,), (1,), (cupy.uint64(16 << 20), loaded))
        stream.synchronize()
        results[index] = bool(int(loaded[0]))


def main() -> None:
    cupy.cuda.Device(0).use()
    cupy.cuda.runtime.deviceSetLimit(HEAP, 64 << 20)  # once, before anything uses the heap
    kernel = cupy.RawKernel(SOURCE, "load_geometry")
    results = [False, False]
    workers = [threading.Thread(target=worker, args=(kernel, results, i), name=f"loader-{i}") for i in range(2)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    print("geometry loaded by every worker:", all(results))


if __name__ == "__main__":
    main()
