"""An engine thread whose pop takes off the primary context a plugin loader put in place of the engine's.

The inference thread pushes its engine's context, then loads a plugin whose loader "makes sure a context
is current" the way some libraries do: it retains the primary context and calls cuCtxSetCurrent, which
replaces the top of the thread's stack. When the engine is done it pops, expecting its own context, and
gets the primary context instead: the engine's push is never popped, and the stack no longer says what
the engine code believes.

Report: https://github.com/inducer/pycuda/issues/335 -- a context switch made behind make_context()'s back
leaves the context stack inconsistent, and the later pop fails ("cuCtxPopCurrent failed: invalid device
context") or takes off a context the code did not push.

Expected finding: context-leak on thread trt-infer, at the line marked HAZARD in infer() (the pop that
returns another context than the one its push put on).

    ctxlab audit -- examples/realworld/leak_pop_wrong_context.py
"""

import os
import sys
import threading

from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import FILL_PTX, check, device  # noqa: E402


def load_plugin(dev) -> tuple:
    primary = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxSetCurrent(primary), "cuCtxSetCurrent")  # replaces the engine's context on the stack
    module = check(driver.cuModuleLoadData(FILL_PTX), "cuModuleLoadData")
    return primary, module


def infer(dev, engine_ctx, out: dict) -> None:
    check(driver.cuCtxPushCurrent(engine_ctx), "cuCtxPushCurrent")
    primary, module = load_plugin(dev)
    err, popped = driver.cuCtxPopCurrent()  # HAZARD: context-leak
    out["pop"] = err.name
    out["popped_engine"] = int(popped) == int(engine_ctx)
    out["popped_primary"] = int(popped) == int(primary)
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    check(driver.cuModuleUnload(module), "cuModuleUnload")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    check(driver.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease")


def main() -> int:
    dev = device(0)
    engine_ctx = check(driver.cuCtxCreate(None, 0, dev), "cuCtxCreate")
    check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    out: dict = {}
    worker = threading.Thread(target=infer, args=(dev, engine_ctx, out), name="trt-infer")
    worker.start()
    worker.join()
    check(driver.cuCtxDestroy(engine_ctx), "cuCtxDestroy")
    print(f"pop {out['pop']}: popped the engine's context {out['popped_engine']}, "
          f"the primary context {out['popped_primary']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
