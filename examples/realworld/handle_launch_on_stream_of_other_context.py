"""A post-processing stage that launches its kernel on the stream the pre-processing stage handed over.

Each stage has a context of its own (cuCtxCreate). The pre-processing stage creates a stream and passes
it downstream so that the post-processing kernel "runs after the upload". The post-processing thread
loads its kernel (a small PTX module) in its own context and launches it on that stream, a stream of the
other context: the launch is refused (CUDA_ERROR_INVALID_HANDLE, "invalid resource handle").

Report: https://github.com/cupy/cupy/issues/3980 -- a stream made current for GPU 0 and then used after
switching to GPU 1 (another context): the next kernel launch fails with CUDA_ERROR_INVALID_HANDLE.

Expected finding: handle-from-another-context on thread postprocess, at the line marked HAZARD in
postprocess() (the cuLaunchKernel; the program catches the status and prints it).

    ctxlab audit -- examples/realworld/handle_launch_on_stream_of_other_context.py
"""

import os
import sys
import threading

from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import FILL_PTX, check, device, fill_args  # noqa: E402

N = 1 << 16


def postprocess(dev, theirs, out: dict) -> None:
    """``theirs``: the pre-processing stage's stream, a stream of its context."""
    ctx = check(driver.cuCtxCreate(None, 0, dev), "cuCtxCreate")
    module = check(driver.cuModuleLoadData(FILL_PTX), "cuModuleLoadData")
    fn = check(driver.cuModuleGetFunction(module, b"fill_u32"), "cuModuleGetFunction")
    result = check(driver.cuMemAlloc(4 * N), "cuMemAlloc")
    args, grid = fill_args(result, N, 9), N // 256
    (err,) = driver.cuLaunchKernel(fn, grid, 1, 1, 256, 1, 1, 0, theirs, args, 0)  # HAZARD: handle-from-another-context
    out["launch"] = err.name
    check(driver.cuCtxSynchronize(), "cuCtxSynchronize")
    check(driver.cuMemFree(result), "cuMemFree")
    check(driver.cuModuleUnload(module), "cuModuleUnload")
    check(driver.cuCtxDestroy(ctx), "cuCtxDestroy")


def main() -> int:
    dev = device(0)
    pre_ctx = check(driver.cuCtxCreate(None, 0, dev), "cuCtxCreate")
    upload_stream = check(driver.cuStreamCreate(int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)), "cuStreamCreate")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    out: dict = {}
    stage = threading.Thread(target=postprocess, args=(dev, upload_stream, out), name="postprocess")
    stage.start()
    stage.join()
    check(driver.cuCtxPushCurrent(pre_ctx), "cuCtxPushCurrent")
    check(driver.cuStreamDestroy(upload_stream), "cuStreamDestroy")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    check(driver.cuCtxDestroy(pre_ctx), "cuCtxDestroy")
    print(f"cuLaunchKernel on the pre-processing stage's stream, from thread postprocess: {out['launch']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
