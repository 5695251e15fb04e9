"""A pycuda-style "autoinit" context made for TensorRT, then CuPy used for the pre-processing.

The program creates a context with cuCtxCreate the way `import pycuda.autoinit` does and leaves it
current. The video pre-processing that follows is CuPy code: CuPy's runtime, which otherwise works on the
primary context, allocates its memory pool and loads its kernels in whatever context is current, here
the created one. Everything CuPy makes now belongs to a context the primary-context libraries of the
process (the decoder, PyTorch, Numba) do not see.

Report: https://github.com/dmlc/decord/issues/245 -- with `import pycuda.autoinit` in the program the GPU
video reader fails with "CUDA error 400: invalid resource handle"; without it, it works.

Expected: non-primary-current and pointer-from-another-context on MainThread at main()'s first HAZARD line, the
latter again at the next (CuPy's cudaSetDevice made the primary current: its kernels read the created's memory).

    ctxlab audit -- examples/realworld/nonprimary_cupy_after_autoinit.py
Info listed after the wave-4 audit counted it: several-runtime-copies (MainThread)."""

import os
import sys

import cupy
from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402


def main() -> int:
    ctx = check(driver.cuCtxCreate(None, 0, device(0)), "cuCtxCreate")  # what pycuda.autoinit does
    frames = cupy.arange(4 * 64 * 64 * 3, dtype=cupy.uint8).reshape(4, 64, 64, 3)  # HAZARD: non-primary-current
    normalised = (frames.astype(cupy.float32) / 255.0 - 0.5) / 0.25  # HAZARD: pointer-from-another-context
    print(f"pre-processed {normalised.shape} frames under the created context: mean {float(normalised.mean()):.4f}")
    del frames, normalised
    cupy.get_default_memory_pool().free_all_blocks()
    current = check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    print(f"the created context is still current: {int(current) == int(ctx)}")
    check(driver.cuCtxDestroy(ctx), "cuCtxDestroy")  # what autoinit's exit handler does
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
