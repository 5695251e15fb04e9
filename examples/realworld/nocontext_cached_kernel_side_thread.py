"""A kernel loaded and cached on the main thread, launched with the driver API from a compile-worker thread.

The main thread binds the primary context (cuDevicePrimaryCtxRetain + cuCtxSetCurrent, as a kernel
loader does), loads a small PTX module and caches its function and an output buffer. A worker thread,
which never made a CUDA call before, launches the cached function on the NULL stream: a thread starts
with no current context, and cuLaunchKernel returns CUDA_ERROR_INVALID_CONTEXT.

Report: https://github.com/triton-lang/triton/pull/1912 -- test failures where a new thread was not bound
to the primary context (no runtime call was made on it), so driver API calls failed; the fix binds the
primary context in loadBinary.

Expected finding: no-context on thread launcher, at the line marked HAZARD in launch() (the program
catches the status and prints it).

    ctxlab audit -- examples/realworld/nocontext_cached_kernel_side_thread.py
"""

import os
import sys
import threading

from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import FILL_PTX, check, device, fill_args  # noqa: E402

N = 1 << 16
CACHE: dict = {}


def launch(out: dict) -> None:
    fn, args = CACHE["fill_u32"], fill_args(CACHE["out"], N, 5)
    (err,) = driver.cuLaunchKernel(fn, N // 256, 1, 1, 256, 1, 1, 0, driver.CUstream(0), args, 0)  # HAZARD: no-context
    out["launch"] = err.name


def main() -> int:
    dev = device(0)
    primary = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxSetCurrent(primary), "cuCtxSetCurrent")
    module = check(driver.cuModuleLoadData(FILL_PTX), "cuModuleLoadData")
    CACHE["fill_u32"] = check(driver.cuModuleGetFunction(module, b"fill_u32"), "cuModuleGetFunction")
    CACHE["out"] = check(driver.cuMemAlloc(4 * N), "cuMemAlloc")
    out: dict = {}
    worker = threading.Thread(target=launch, args=(out,), name="launcher")
    worker.start()
    worker.join()
    check(driver.cuCtxSynchronize(), "cuCtxSynchronize")
    check(driver.cuMemFree(CACHE["out"]), "cuMemFree")
    check(driver.cuModuleUnload(module), "cuModuleUnload")
    check(driver.cuCtxSetCurrent(driver.CUcontext(0)), "cuCtxSetCurrent")
    check(driver.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease")
    print(f"cuLaunchKernel of the cached kernel on thread launcher: {out['launch']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
