"""What each recorded call does to the ordering model (``ctxlab.audit.ordering``), by its base name: the
driver's and the runtime's name without their version (``_v2``, ``_v3020``) and per-thread (``_ptsz``,
``_ptds``) suffixes, so ``cuMemcpyHtoDAsync_v2_ptsz`` and ``cudaMemcpyAsync_ptsz`` are the asynchronous copies
they are, and ``cudaFreeAsync`` is never taken for ``cudaFree``."""

from __future__ import annotations

import functools
import re

_SUFFIX = re.compile(r"(_v\d+)?(_pt(sz|ds))?(_v\d+)?$")

KERNELS = frozenset({"cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel", "cudaLaunchKernel",
                     "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel"})
ASYNC_COPIES = frozenset({"cuMemcpyAsync", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync",
                          "cudaMemcpyAsync"})
SYNC_COPIES = frozenset({"cuMemcpy", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemcpyDtoD", "cudaMemcpy"})
ASYNC_SETS = frozenset({"cuMemsetD8Async", "cuMemsetD16Async", "cuMemsetD32Async", "cudaMemsetAsync"})
SYNC_SETS = frozenset({"cuMemsetD8", "cuMemsetD16", "cuMemsetD32", "cudaMemset"})
RECORDS = frozenset({"cuEventRecord", "cuEventRecordWithFlags", "cudaEventRecord", "cudaEventRecordWithFlags"})
WAITS = frozenset({"cuStreamWaitEvent", "cudaStreamWaitEvent"})
# a stream query or event query that returned success saw the work finish, as a synchronisation does
STREAM_SYNCS = frozenset({"cuStreamSynchronize", "cudaStreamSynchronize", "cuStreamQuery", "cudaStreamQuery"})
EVENT_SYNCS = frozenset({"cuEventSynchronize", "cudaEventSynchronize", "cuEventQuery", "cudaEventQuery"})
# the context's or device's work finished by the call's return: explicit, and the frees that synchronise
DEVICE_SYNCS = frozenset({"cuCtxSynchronize", "cudaDeviceSynchronize", "cudaThreadSynchronize", "cuMemFree",
                          "cudaFree", "cuMemHostUnregister", "cudaHostUnregister"})
ALLOCS = frozenset({"cuMemAlloc", "cuMemAllocManaged", "cuMemAllocPitch", "cudaMalloc", "cudaMallocManaged"})
ASYNC_ALLOCS = frozenset({"cuMemAllocAsync", "cuMemAllocFromPoolAsync", "cudaMallocAsync",
                          "cudaMallocFromPoolAsync"})
SYNC_FREES = frozenset({"cuMemFree", "cudaFree"})
ASYNC_FREES = frozenset({"cuMemFreeAsync", "cudaFreeAsync"})
STREAM_CREATES = frozenset({"cuStreamCreate", "cuStreamCreateWithPriority", "cudaStreamCreate",
                            "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority"})
EVENT_CREATES = frozenset({"cuEventCreate", "cudaEventCreate", "cudaEventCreateWithFlags"})
EVENT_DESTROYS = frozenset({"cuEventDestroy", "cudaEventDestroy"})
CAPTURE_BEGINS = frozenset({"cuStreamBeginCapture", "cudaStreamBeginCapture"})
CAPTURE_ENDS = frozenset({"cuStreamEndCapture", "cudaStreamEndCapture"})
INSTANTIATES = frozenset({"cuGraphInstantiate", "cuGraphInstantiateWithFlags", "cuGraphInstantiateWithParams",
                          "cudaGraphInstantiate", "cudaGraphInstantiateWithFlags", "cudaGraphInstantiateWithParams"})
GRAPH_LAUNCHES = frozenset({"cuGraphLaunch", "cudaGraphLaunch"})
HOST_FUNCS = frozenset({"cuLaunchHostFunc", "cudaLaunchHostFunc"})
IPC_EXPORTS = frozenset({"cuIpcGetMemHandle", "cudaIpcGetMemHandle"})
# a wait on a value in memory holds the stream back until some other party writes it: what is queued behind it
# is ordered by a write the model cannot tie to it (a batch of memory operations may hold such a wait)
VALUE_WAITS = frozenset({"cuStreamWaitValue32", "cuStreamWaitValue64", "cuStreamBatchMemOp"})
VALUE_WRITES = frozenset({"cuStreamWriteValue32", "cuStreamWriteValue64"})
# work enqueued on a stream (a synchronous copy or memset on the legacy or per-thread default stream)
WORK = KERNELS | ASYNC_COPIES | SYNC_COPIES | ASYNC_SETS | SYNC_SETS | GRAPH_LAUNCHES | HOST_FUNCS | VALUE_WAITS \
    | VALUE_WRITES
MODELLED = (WORK | RECORDS | WAITS | STREAM_SYNCS | EVENT_SYNCS | DEVICE_SYNCS | ALLOCS | ASYNC_ALLOCS | ASYNC_FREES
            | STREAM_CREATES | EVENT_CREATES | EVENT_DESTROYS | CAPTURE_BEGINS | CAPTURE_ENDS | INSTANTIATES
            | IPC_EXPORTS)
# The calls whose user stack the ordering findings name (the audit's extra callbacks hold them).
ORDERING_CALLBACKS = ("cuMemcpyAsync", "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoDAsync_v2",
                      "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemsetD8Async", "cuMemsetD32Async", "cuMemFreeAsync",
                      "cuMemAllocAsync", "cuStreamWaitEvent", "cuIpcGetMemHandle", "cuStreamEndCapture",
                      "cudaMemcpyAsync", "cudaMemcpy", "cudaMemsetAsync", "cudaMallocAsync", "cudaFreeAsync",
                      "cudaStreamWaitEvent", "cudaEventRecord", "cudaEventCreate", "cudaEventCreateWithFlags",
                      "cudaIpcGetMemHandle", "cudaStreamEndCapture")


@functools.lru_cache(maxsize=4096)  # a program calls few distinct names, each many times
def base_name(name: str) -> str:
    """A call's name without its version and per-thread suffixes."""
    return _SUFFIX.sub("", name)


def per_thread(name: str) -> bool:
    """Whether the call is the per-thread default stream's variant (its NULL stream is the thread's own)."""
    return "_ptsz" in name or "_ptds" in name
