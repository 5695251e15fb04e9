"""A block arena that returns its cached blocks with cudaFree while holding the lock its step callbacks need.

An AMR solver keeps device blocks in an arena whose release threshold is 0: whenever a step has taken its
block, trim() gives every other cached block back to the driver with cudaFree, under the arena's lock. Each
step runs its work on a non-blocking stream and enqueues, behind it, a host function (cudaLaunchHostFunc)
that hands the step's block back to the arena, under the same lock. The step does all of this inside the
arena's lock. cudaFree of an ordinary allocation synchronises the device before it frees: it waits for the
host function, and the host function waits for the lock the thread inside cudaFree holds. Neither goes on.
The test harness arms faulthandler.dump_traceback_later(3, exit=True), which prints the stacks and ends the
process from C with _exit(1) after 3 s, so no os._exit is ever called.

Report: https://github.com/AMReX-Codes/amrex/pull/4044 -- a GPU test hangs with the arena's release threshold
at 0: "CUDA host callback functions do not work well with cudaFree in the main host thread"; the fix avoids
cudaFree inside the loop that enqueues the callbacks.

Expected finding: program-hung on thread MainThread, at the line marked HAZARD in Arena.trim() (the cudaFree
it is blocked in), with its because at the line marked CAUSE in step() (the cudaLaunchHostFunc that queued
the host function it waits for). Ends by faulthandler's _exit(1), about 3 s after the step starts.

    ctxlab audit -- examples/realworld/hang_faulthandler_exit_cuda_free_while_host_func_waits_for_arena.py
"""

import ctypes
import faulthandler
import os
import sys
import threading

from cuda.bindings import runtime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check  # noqa: E402

DEADLINE_S = 3
BLOCK_BYTES = 16 << 20
CACHED_BLOCKS = 4
HOST_FN = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p)  # as cuda-bindings' own tests declare host functions


class Arena:
    """Device blocks cached for reuse; a release threshold of 0 gives every spare block back at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cached = [check(runtime.cudaMalloc(BLOCK_BYTES), "cudaMalloc") for _ in range(CACHED_BLOCKS)]

    def give_back(self, block) -> None:
        with self.lock:
            self.cached.append(block)

    def trim(self) -> None:
        """Called with the lock held: the spare blocks go back to the driver."""
        while len(self.cached) > 1:
            check(runtime.cudaFree(self.cached.pop()), "cudaFree")  # HAZARD: program-hung


def step(arena: Arena, stream, keep: list) -> None:
    with arena.lock:
        block = arena.cached.pop()
        check(runtime.cudaMemsetAsync(block, 0, BLOCK_BYTES, stream), "cudaMemsetAsync")

        def on_step_done(_user) -> int:
            arena.give_back(block)  # runs on CUDA's host-function thread once the memset is done
            return 0

        callback = HOST_FN(on_step_done)
        keep.append(callback)
        fn = runtime.cudaHostFn_t(_ptr=ctypes.addressof(callback))
        check(runtime.cudaLaunchHostFunc(stream, fn, 0), "cudaLaunchHostFunc")  # CAUSE: program-hung
        arena.trim()


def main() -> int:
    faulthandler.dump_traceback_later(DEADLINE_S, exit=True)  # the harness's hang guard
    check(runtime.cudaSetDevice(0), "cudaSetDevice")
    stream = check(runtime.cudaStreamCreateWithFlags(runtime.cudaStreamNonBlocking), "cudaStreamCreateWithFlags")
    arena, keep = Arena(), []
    step(arena, stream, keep)
    check(runtime.cudaStreamSynchronize(stream), "cudaStreamSynchronize")
    faulthandler.cancel_dump_traceback_later()
    print("step done (not expected: the arena's trim deadlocks with the step's callback)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
