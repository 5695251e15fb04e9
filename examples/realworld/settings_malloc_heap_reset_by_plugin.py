"""A geometry loader whose kernels allocate with device-side malloc raises the malloc heap limit to 64 MiB, as
its documentation says to, and then imports a plugin whose initialisation, on a thread of its own, sets the heap
limit to the CUDA default of 8 MiB. The loader's kernel then asks for 16 MiB: device malloc returns NULL and the
geometry is silently not loaded (the kernel writes a flag the program prints; no CUDA call fails).

Reports: https://github.com/cupy/cupy/issues/8693 -- the malloc heap limit set through
cupy.cuda.runtime.deviceSetLimit, for kernels that malloc; https://github.com/celeritas-project/celeritas/pull/554
-- the default 8 MiB heap is too small to load a large geometry, so the heap is resized. The limit is one per
context: whoever sets it last wins for everyone.

Expected findings (written from the reports, before a run): setting-changed-under on thread plugin-init at the
plugin's deviceSetLimit (warning), its because the loader's deviceSetLimit on MainThread, with the loader's
kernel launch named as the call that then behaved differently.

    ctxlab audit -- examples/realworld/settings_malloc_heap_reset_by_plugin.py
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


def plugin_init() -> None:
    # the plugin "restores a sane default" when it starts
    cupy.cuda.runtime.deviceSetLimit(HEAP, 8 << 20)  # HAZARD: setting-changed-under


def main() -> None:
    cupy.cuda.Device(0).use()
    cupy.cuda.runtime.deviceSetLimit(HEAP, 64 << 20)  # CAUSE: setting-changed-under
    plugin = threading.Thread(target=plugin_init, name="plugin-init")
    plugin.start()
    plugin.join()
    kernel = cupy.RawKernel(SOURCE, "load_geometry")
    loaded = cupy.zeros(1, dtype=cupy.int32)
    kernel((1,), (1,), (cupy.uint64(16 << 20), loaded))
    cupy.cuda.runtime.deviceSynchronize()
    print("heap limit now", cupy.cuda.runtime.deviceGetLimit(HEAP), "geometry loaded:", bool(int(loaded[0])))


if __name__ == "__main__":
    main()
