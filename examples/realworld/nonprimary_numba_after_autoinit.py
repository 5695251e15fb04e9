"""A pycuda-style "autoinit" context made at import time, then Numba asked for its context.

The program starts like the scripts that `import pycuda.autoinit`: a context is created with cuCtxCreate
on GPU 0 and left current on the main thread. Numba works on the primary context only; when it attaches
(numba.cuda.current_context(), which every Numba array call makes) it finds a non-primary context current
and refuses with "Numba cannot operate on non-primary CUDA context". The program catches the error.

Report: https://github.com/inducer/pycuda/pull/102 -- using pycuda together with Numba fails with
"Numba cannot operate on non-primary CUDA context" because pycuda's contexts are not the primary one.

Expected finding: non-primary-current on thread MainThread, at the line marked HAZARD in main() (Numba's
attach while the autoinit context is current).

    ctxlab audit -- examples/realworld/nonprimary_numba_after_autoinit.py
"""

import os
import sys

from cuda.bindings import driver
from numba import cuda

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402


def autoinit():
    """What `import pycuda.autoinit` does: make a context on device 0 and leave it current."""
    return check(driver.cuCtxCreate(None, 0, device(0)), "cuCtxCreate")


def main() -> int:
    ctx = autoinit()
    try:
        numba_ctx = cuda.current_context()  # HAZARD: non-primary-current
        print(f"numba attached to {numba_ctx}")
    except Exception as exc:
        print(f"numba refused: {type(exc).__name__}: {exc}")
    check(driver.cuCtxDestroy(ctx), "cuCtxDestroy")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
