"""A progress engine whose shutdown drains the context before it sets the persistent kernel's stop flag.

A communication library keeps a persistent "progress" kernel running on a stream of its own: one thread
that polls a stop flag in mapped, page-locked host memory (cuMemHostAlloc with DEVICEMAP) and returns once
the host sets it. The engine's shutdown() first "drains outstanding GPU work" with cuCtxSynchronize and only
then writes the stop flag. cuCtxSynchronize waits for every stream of the context, the progress kernel's
too, and that kernel ends only after the write that comes after the synchronize: the shutdown hangs. As
in the report's reproducer, a watchdog thread started with the shutdown gives it 3 s and then ends the
process with os._exit(1).

Report: https://github.com/meta-pytorch/torchcomms/pull/2334 -- a persistent kernel polls a shutdown flag
and the only call that can flip the flag is itself blocked behind the busy GPU: a true deadlock, ended by
a watchdog thread that _Exits the process.

Expected finding: program-hung on thread MainThread, at the line marked HAZARD in Engine.shutdown() (the
cuCtxSynchronize it is blocked in). Ends by the watchdog's os._exit(1) on thread shutdown-watchdog, about
3 s after the shutdown starts.

    ctxlab audit -- examples/realworld/hang_persistent_kernel_stop_flag_after_ctx_sync.py
"""

import ctypes
import os
import sys
import threading

from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

DEADLINE_S = 3.0
NON_BLOCKING = int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)

# progress_loop(stop): spin (with nanosleep) until *stop != 0. PTX ISA 8.0 for sm_90, the H200's.
PROGRESS_PTX = b"""
.version 8.0
.target sm_90
.address_size 64

.visible .entry progress_loop(
    .param .u64 progress_loop_stop
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<2>;
    .reg .b64 %rd<3>;

    ld.param.u64 %rd1, [progress_loop_stop];
    cvta.to.global.u64 %rd2, %rd1;
POLL:
    nanosleep.u32 10000;
    ld.volatile.global.u32 %r1, [%rd2];
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra POLL;
    ret;
}
\x00"""


class Engine:
    def __init__(self, dev) -> None:
        self.dev = dev
        self.primary = check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        check(driver.cuCtxPushCurrent(self.primary), "cuCtxPushCurrent")
        self.module = check(driver.cuModuleLoadData(PROGRESS_PTX), "cuModuleLoadData")
        self.loop = check(driver.cuModuleGetFunction(self.module, b"progress_loop"), "cuModuleGetFunction")
        flags = driver.CU_MEMHOSTALLOC_DEVICEMAP
        self.stop_host = check(driver.cuMemHostAlloc(4, flags), "cuMemHostAlloc")
        self.stop_flag = ctypes.c_uint32.from_address(int(self.stop_host))
        self.stop_flag.value = 0
        self.stop_device = check(driver.cuMemHostGetDevicePointer(self.stop_host, 0), "cuMemHostGetDevicePointer")
        self.stream = check(driver.cuStreamCreate(NON_BLOCKING), "cuStreamCreate")

    def start(self) -> None:
        args = ((int(self.stop_device),), (ctypes.c_void_p,))
        check(driver.cuLaunchKernel(self.loop, 1, 1, 1, 1, 1, 1, 0, self.stream, args, 0), "cuLaunchKernel")

    def shutdown(self) -> None:
        check(driver.cuCtxSynchronize(), "cuCtxSynchronize")  # HAZARD: program-hung
        self.stop_flag.value = 1  # never reached: the kernel waits for this write
        check(driver.cuStreamSynchronize(self.stream), "cuStreamSynchronize")


def watchdog(done: threading.Event) -> None:
    if done.wait(DEADLINE_S):
        return
    print(f"shutdown-watchdog: shutdown still blocked after {DEADLINE_S:.0f} s; exiting the process", flush=True)
    os._exit(1)


def main() -> int:
    engine = Engine(device(0))
    engine.start()
    print("progress kernel running; shutting the engine down", flush=True)
    done = threading.Event()
    guard = threading.Thread(target=watchdog, args=(done,), name="shutdown-watchdog", daemon=True)
    guard.start()
    engine.shutdown()
    done.set()
    print("engine shut down (not expected: the shutdown deadlocks)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
