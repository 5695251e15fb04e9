"""numba-cuda: the context Numba makes or adopts, and (unless --context-only) a
small kernel. Written without ctxlab in mind; trace it with

    ctxlab trace -- examples/programs/numba_kernel.py [--context-only]

Exit status 3 when Numba cannot compile the kernel here (as numba-cuda 0.30 with
numpy 2.5, whose np.row_stack it still calls), after the context part ran.
"""

import sys

import numpy as np
from numba import cuda


def main(context_only: bool) -> int:
    ctx = cuda.current_context()  # creates or adopts the primary context of device 0
    handle = getattr(ctx.handle, "value", ctx.handle)  # a ctypes handle (old numba) or a cuda.bindings CUcontext
    print(f"numba context: device {ctx.device.id}, handle {int(handle or 0):#x}")
    if context_only:
        return 0
    try:
        @cuda.jit
        def twice(out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = 2 * i

        out = cuda.device_array(1024, dtype=np.int64)
        twice[4, 256](out)
        total = int(out.copy_to_host().sum())
    except AttributeError as exc:
        print(f"numba cannot compile a kernel here: {exc}")
        return 3
    print(f"numba kernel sum: {total}")
    return 0 if total == 1024 * 1023 else 1


if __name__ == "__main__":
    sys.exit(main("--context-only" in sys.argv[1:]))
