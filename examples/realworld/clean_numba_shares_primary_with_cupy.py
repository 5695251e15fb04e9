"""Clean: Numba attaches to the primary context CuPy made current and reads a CuPy array through the interface.

CuPy computes on GPU 0 (the primary context). Numba, asked for its context afterwards, picks up the
active context because it is the primary one; numba.cuda.as_cuda_array takes CuPy's
__cuda_array_interface__, which names CuPy's current stream, and synchronises it before the copy.

Report: https://github.com/numba/numba/pull/4114 -- Numba picks up the active CUDA context even if third
party code activated it, as long as it is the primary context (non-primary contexts are rejected).

Expected findings: none (no error, no warning).

    ctxlab audit -- examples/realworld/clean_numba_shares_primary_with_cupy.py
"""

import cupy
from numba import cuda

N = 1 << 16


def main() -> int:
    cupy.cuda.Device(0).use()
    x = cupy.arange(N, dtype=cupy.float32) * 0.5
    ctx = cuda.current_context()
    view = cuda.as_cuda_array(x)  # syncs the stream CuPy's interface names
    host = view.copy_to_host()
    print(f"numba on device {ctx.device.id}: sum {float(host.sum()):.1f} (expected {0.5 * N * (N - 1) / 2:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
