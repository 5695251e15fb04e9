"""An event cache destroyed by an atexit handler after another handler reset the device at exit.

A reader library caches CUDA events (cudaEventCreate) and registers an atexit handler that destroys
them. The application registers, later, a handler that calls cudaDeviceReset "to hand the GPU back
cleanly". atexit runs handlers last-registered first: the reset destroys the primary context with the
events in it, then the cache's handler destroys events that no longer exist and prints the status.

Report: https://github.com/rapidsai/cudf/issues/16018 -- at exit, cudaEventDestroy of cached events hits
cudaErrorContextIsDestroyed (error 709): the destructors run after the context was destroyed.

Expected finding: program-crashed on thread MainThread, at the line marked HAZARD in EventCache.close()
(the cudaEventDestroy after the cudaDeviceReset marked TEARDOWN), naming the context the reset destroyed.
Both run as atexit handlers, after main() has returned. Changed after the audit ran programs in a child
(wave 4): it expected used-after-teardown, a refused call; on the H200 (driver 580.159) the program segfaults
inside that cudaEventDestroy by itself (exit 139 without ctxlab), so the call never returns, and the in-process
audit of before died with it. The crash is what the audit now reports there.

    ctxlab audit -- examples/realworld/teardown_atexit_event_destroy_after_reset.py
"""

import atexit
import os
import sys

from cuda.bindings import runtime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check  # noqa: E402


class EventCache:
    def __init__(self) -> None:
        self.event = None
        atexit.register(self.close)  # registered first: runs last

    def get(self):
        if self.event is None:
            self.event = check(runtime.cudaEventCreate(), "cudaEventCreate")
        return self.event

    def close(self) -> None:
        if self.event is not None:
            (err,) = runtime.cudaEventDestroy(self.event)  # HAZARD: program-crashed
            print(f"atexit: cached event destroyed after the reset: {err.name}", flush=True)
            self.event = None


def hand_back_gpu() -> None:
    (err,) = runtime.cudaDeviceReset()  # TEARDOWN
    print(f"atexit: cudaDeviceReset: {err.name}", flush=True)


def main() -> int:
    cache = EventCache()
    check(runtime.cudaSetDevice(0), "cudaSetDevice")
    atexit.register(hand_back_gpu)  # registered second: runs first
    stream = check(runtime.cudaStreamCreate(), "cudaStreamCreate")
    done = cache.get()
    check(runtime.cudaEventRecord(done, stream), "cudaEventRecord")
    check(runtime.cudaEventSynchronize(done), "cudaEventSynchronize")
    check(runtime.cudaStreamDestroy(stream), "cudaStreamDestroy")
    print("reading done; the atexit handlers run next", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
