"""Hazard pointer-from-another-context: CuPy's pool memory of the primary context given to a kernel
launched under a cuCtxCreate context.

CuPy's array of the primary context's pool goes to a kernel CuPy loads and launches in a cuCtxCreate context.
It reads correctly (migrate.own-address-space), but a reset, or CuPy's pool handing the block out again, would
pull it from under that context (migrate.cupy-pool-across-contexts): the warning. Written to exit 0; the audit
exits 3 since its ordering model (wave 5, seen on an H100) adds two errors that follow: asnumpy copies b in the
primary context (CuPy's device guard), on another legacy stream than the kernel that wrote it (READ), and a
goes back to the pool while that kernel may still read it (FREED). labs/audit.md has the run.

    ctxlab audit -- examples/hazards/pointer_from_another_context.py
"""

import os
import sys

import cupy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _cuda import create_context, device  # noqa: E402


def main() -> int:
    cupy.cuda.runtime.setDevice(0)
    a = cupy.arange(4096, dtype=cupy.float32)  # ALLOCATED: memory of the primary context (CuPy's pool)
    cupy.cuda.runtime.deviceSynchronize()
    create_context(device(0))  # a second context, current on this thread now
    b = a * 2.5  # HAZARD: a new kernel, loaded and launched in the second context, reads the primary's memory
    host = cupy.asnumpy(b)  # READ: unordered-access (the primary context's legacy stream, not the created one's)
    print(f"a * 2.5 computed under the created context: b[4095] = {host[4095]:.1f} (expected {4095 * 2.5:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())  # FREED: freed-while-in-use (a back to CuPy's pool as main returns)
