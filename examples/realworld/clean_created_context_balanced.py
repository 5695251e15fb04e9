"""Clean: a created context made, used and destroyed by one thread, every push matched by a pop.

The solver thread creates its context (which makes it current), allocates, and pops it; each solve
pushes it, works and pops it in a finally block; at the end the thread pushes it once more to free its
memory, pops it and destroys it. The thread ends with an empty context stack and nothing leaks.

Report: https://github.com/openmm/openmm/pull/3258 -- selecting a CUDA context by cuCtxPushCurrent and
cuCtxPopCurrent in a scoped selector (push in the constructor, pop in the destructor) instead of
leaving contexts set as current.

Expected findings: none (no error, no warning).

    ctxlab audit -- examples/realworld/clean_created_context_balanced.py
"""

import os
import sys
import threading

import numpy as np
from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

N = 1 << 14


def solver(out: list) -> None:
    ctx = check(driver.cuCtxCreate(None, 0, device(0)), "cuCtxCreate")
    state = check(driver.cuMemAlloc(4 * N), "cuMemAlloc")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    for step in range(3):
        check(driver.cuCtxPushCurrent(ctx), "cuCtxPushCurrent")
        try:
            check(driver.cuMemsetD32(state, step + 1, N), "cuMemsetD32")
            host = np.empty(N, dtype=np.uint32)
            check(driver.cuMemcpyDtoH(host.ctypes.data, state, 4 * N), "cuMemcpyDtoH")
            out.append(int(host.sum()))
        finally:
            check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    check(driver.cuCtxPushCurrent(ctx), "cuCtxPushCurrent")
    check(driver.cuMemFree(state), "cuMemFree")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    check(driver.cuCtxDestroy(ctx), "cuCtxDestroy")


def main() -> int:
    out: list = []
    t = threading.Thread(target=solver, args=(out,), name="solver")
    t.start()
    t.join()
    print(f"solves {out}; all right: {out == [(s + 1) * N for s in range(3)]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
