"""A device-heap limit raised too late: cudaDeviceSetLimit fails, the program goes on, device malloc fails later.

A CuPy pipeline whose kernels build per-block lookup tables with device-side malloc(). Its tokenizer's
warm-up kernel already calls malloc() (with the default 8 MiB device heap). Only afterwards does the table
builder raise the heap to 256 MiB with cupy.cuda.runtime.deviceSetLimit(cudaLimitMallocHeapSize, ...). The
limit may not be changed once a kernel that uses malloc() has been launched: the call fails with
cudaErrorInvalidValue. The builder catches the error, prints that it "continues with the default", and
launches its 64 blocks, each asking malloc() for a 2 MiB table: with the 8 MiB heap almost all of them get
NULL, and the program prints how many tables could not be built. A failing settings call is never a probe
a library handled: the program ran on with a setting it did not get.

Report: https://github.com/cp2k/dbcsr/issues/776 -- on an H100, "DeviceSetLimit failed with error
cudaErrorInvalidValue": a device-side system-call limit was set after a kernel using that system call had
run, which the documentation forbids ("must not be performed after launching any kernel that uses ...").

Expected finding: failed-call on thread MainThread, at the line marked HAZARD in build_tables() (the
deviceSetLimit that returned cudaErrorInvalidValue, with cuCtxSetLimit beneath it). Exits 0.

    ctxlab audit -- examples/realworld/failed_set_malloc_heap_limit_after_first_malloc_kernel.py
"""

import cupy
import numpy as np
from cupy.cuda import runtime

HEAP_BYTES = 256 << 20
TABLE_BYTES = 2 << 20
BLOCKS = 64

KERNELS = r"""
extern "C" __global__ void warm_up(int* ok) {
    char* scratch = (char*)malloc(64);
    ok[0] = scratch != NULL;
    if (scratch != NULL) free(scratch);
}

extern "C" __global__ void build_table(unsigned long long bytes, int* failed) {
    char* table = (char*)malloc(bytes);
    if (table == NULL) {
        atomicAdd(failed, 1);
        return;
    }
    table[0] = 1;
    free(table);
}
"""


def warm_up_tokenizer(module: cupy.RawModule) -> None:
    ok = cupy.zeros(1, dtype=cupy.int32)
    module.get_function("warm_up")((1,), (1,), (ok,))
    cupy.cuda.Device().synchronize()


def build_tables(module: cupy.RawModule) -> int:
    try:
        runtime.deviceSetLimit(runtime.cudaLimitMallocHeapSize, HEAP_BYTES)  # HAZARD: failed-call
    except runtime.CUDARuntimeError as exc:
        print(f"could not raise the device heap ({exc}); continuing with the default", flush=True)
    failed = cupy.zeros(1, dtype=cupy.int32)
    module.get_function("build_table")((BLOCKS,), (1,), (np.uint64(TABLE_BYTES), failed))
    cupy.cuda.Device().synchronize()
    return int(failed[0])


def main() -> int:
    module = cupy.RawModule(code=KERNELS)
    warm_up_tokenizer(module)
    failed = build_tables(module)
    print(f"{failed} of {BLOCKS} lookup tables could not be built (device malloc returned NULL)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
