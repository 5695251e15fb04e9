"""A C library's progress thread whose completion callback reads a module global's device address as host memory.

A job runner (driver API) loads a module whose kernel counts finished work items in a __device__ global
(done_count). Completion is watched by a progress thread the runner's C core starts with pthread_create
(here through ctypes) and names gpu-progress; the thread calls back into Python, which polls the job's
stream with cuStreamQuery and, once the job is done, reads the counter. The callback takes the address
cuModuleGetGlobal returned, a device virtual address, and reads it as if it were host memory: the driver
reserves that range without access on the host, so the read faults (SIGSEGV) on the progress thread, a
thread the program did not start. The job is held for a second by a GPU-side wait, so the thread is seen
polling first.

Report: https://github.com/sonots/cumo/pull/174 -- Module#get_global_var segfaults: it copies a module global
from the CUdeviceptr cuModuleGetGlobal reports as if it were a host pointer; the address lies in a PROT_NONE
range the driver reserves for the unified address space, so even a one-byte read faults.

Expected finding: program-crashed on thread gpu-progress, at the line marked HAZARD in on_progress() (the
read of the device address). Ends by SIGSEGV.

    ctxlab audit -- examples/realworld/crash_progress_thread_reads_device_global_as_host_memory.py
"""

import ctypes
import os
import sys
import time

from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402

HOLD_S = 1.0
POLL_S = 0.02
NON_BLOCKING = int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)
GEQ = int(driver.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ)

# count_done(): done_count += 1 (one thread). PTX ISA 8.0 for sm_90, the H100's and H200's.
COUNT_PTX = b"""
.version 8.0
.target sm_90
.address_size 64

.visible .global .align 4 .u32 done_count;

.visible .entry count_done()
{
    .reg .b32 %r<3>;

    ld.global.u32 %r1, [done_count];
    add.u32 %r2, %r1, 1;
    st.global.u32 [done_count], %r2;
    ret;
}
\x00"""

LIBC = ctypes.CDLL(None)
THREAD_START = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
LIBC.pthread_create.argtypes = [ctypes.POINTER(ctypes.c_ulong), ctypes.c_void_p, THREAD_START, ctypes.c_void_p]
LIBC.pthread_join.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
LIBC.pthread_self.restype = ctypes.c_ulong
LIBC.pthread_setname_np.argtypes = [ctypes.c_ulong, ctypes.c_char_p]


class Job:
    def __init__(self, primary) -> None:
        self.primary = primary
        self.module = check(driver.cuModuleLoadData(COUNT_PTX), "cuModuleLoadData")
        self.kernel = check(driver.cuModuleGetFunction(self.module, b"count_done"), "cuModuleGetFunction")
        self.counter, _size = check(driver.cuModuleGetGlobal(self.module, b"done_count"), "cuModuleGetGlobal")
        self.stream = check(driver.cuStreamCreate(NON_BLOCKING), "cuStreamCreate")
        self.gate = check(driver.cuMemAlloc(4), "cuMemAlloc")
        check(driver.cuMemsetD32(self.gate, 0, 1), "cuMemsetD32")

    def submit(self) -> None:
        check(driver.cuStreamWaitValue32(self.stream, self.gate, 1, GEQ), "cuStreamWaitValue32")
        check(driver.cuLaunchKernel(self.kernel, 1, 1, 1, 1, 1, 1, 0, self.stream, 0, 0), "cuLaunchKernel")


def on_progress(job: Job) -> None:
    """The progress thread's callback: wait for the job, then read how many items it finished."""
    check(driver.cuCtxSetCurrent(job.primary), "cuCtxSetCurrent")
    while True:
        (err,) = driver.cuStreamQuery(job.stream)
        if err == driver.CUresult.CUDA_SUCCESS:
            break
        time.sleep(POLL_S)
    done = ctypes.c_uint32.from_address(int(job.counter)).value  # HAZARD: program-crashed
    print(f"gpu-progress: job finished {done} item(s)", flush=True)


def main() -> int:
    primary = check(driver.cuDevicePrimaryCtxRetain(device(0)), "cuDevicePrimaryCtxRetain")
    check(driver.cuCtxPushCurrent(primary), "cuCtxPushCurrent")
    job = Job(primary)
    job.submit()

    def progress_main(_arg):
        LIBC.pthread_setname_np(LIBC.pthread_self(), b"gpu-progress")
        on_progress(job)
        return None

    entry = THREAD_START(progress_main)
    thread = ctypes.c_ulong()
    if LIBC.pthread_create(ctypes.byref(thread), None, entry, None) != 0:
        raise OSError("pthread_create failed")
    time.sleep(HOLD_S)
    check(driver.cuMemsetD32(job.gate, 1, 1), "cuMemsetD32")  # release the job
    LIBC.pthread_join(thread.value, None)
    print("job done (not expected: the progress thread reads device memory on the host)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
