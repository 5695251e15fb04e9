"""Hazard fork-after-init: CUDA used in a child forked after the parent initialised it.

The parent runs a CuPy reduction, then forks; the child runs another one. In a child forked after
initialisation every driver call returns CUDA_ERROR_NOT_INITIALIZED and CuPy raises
cudaErrorInitializationError (lab claims interop.fork.cupy, interop.start-methods).

    ctxlab audit -- examples/hazards/fork_after_init.py
"""

import os

import cupy


def main() -> int:
    cupy.cuda.runtime.setDevice(0)
    print(f"parent: {int(cupy.arange(10).sum())}", flush=True)
    pid = os.fork()
    if pid == 0:
        try:
            total = int((cupy.arange(10) + 1).sum())  # HAZARD: CUDA in a child forked after initialisation
            print(f"child: {total}", flush=True)
        except Exception as exc:
            print(f"child: {type(exc).__name__}: {exc}", flush=True)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    print(f"child exit status: {os.waitstatus_to_exitcode(status)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
