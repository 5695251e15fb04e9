"""The audit's one vocabulary: every family of driver and runtime calls the audit names, and the names of the
notes its child writes beside the calls, each under one name, defined here once.

Three kinds of family, told apart by their names:

- Sets of **base names** (``frozenset``), matched with ``base_name(name) in FAMILY``: the driver's and the
  runtime's name without its version (``_v2``, ``_v3020``) and per-thread (``_ptsz``, ``_ptds``) suffixes, so
  ``cuMemcpyHtoDAsync_v2_ptsz`` and ``cudaMemcpyAsync_ptsz`` are the asynchronous copies they are, and
  ``cudaFreeAsync`` is never taken for ``cudaFree``. What each does to the ordering model
  (``ctxlab.audit.model.ordering``).
- Tuples of **name prefixes** (``*_PREFIXES``), matched with ``name.startswith(FAMILY)``: the families the state
  model's replay, the rules and the endings test a recorded name against (``cuMemAlloc`` covers
  ``cuMemAlloc_v2`` and ``cuMemAllocManaged``).
- Tuples of **exact recorded names** (``HOOKED_*``): the driver calls the in-process hooks replay as they come.
"""

from __future__ import annotations

import functools
import re

from ctxlab.tracing.names import KERNEL_LAUNCHES

_SUFFIX = re.compile(r"(_v\d+)?(_pt(sz|ds))?(_v\d+)?$")

ASYNC_COPIES = frozenset({"cuMemcpyAsync", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync",
                          "cudaMemcpyAsync"})
SYNC_COPIES = frozenset({"cuMemcpy", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemcpyDtoD", "cudaMemcpy"})
ASYNC_SETS = frozenset({"cuMemsetD8Async", "cuMemsetD16Async", "cuMemsetD32Async", "cudaMemsetAsync"})
SYNC_SETS = frozenset({"cuMemsetD8", "cuMemsetD16", "cuMemsetD32", "cudaMemset"})
EVENT_RECORDS = frozenset({"cuEventRecord", "cuEventRecordWithFlags", "cudaEventRecord", "cudaEventRecordWithFlags"})
EVENT_WAITS = frozenset({"cuStreamWaitEvent", "cudaStreamWaitEvent"})
# a stream query or event query that returned success saw the work finish, as a synchronisation does
SEES_STREAM_DONE = frozenset({"cuStreamSynchronize", "cudaStreamSynchronize", "cuStreamQuery", "cudaStreamQuery"})
SEES_EVENT_DONE = frozenset({"cuEventSynchronize", "cudaEventSynchronize", "cuEventQuery", "cudaEventQuery"})
# the context's or device's work finished by the call's return: explicit, and the frees that synchronise
SEES_CONTEXT_DONE = frozenset({"cuCtxSynchronize", "cudaDeviceSynchronize", "cudaThreadSynchronize", "cuMemFree",
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
STREAM_WORK = (KERNEL_LAUNCHES | ASYNC_COPIES | SYNC_COPIES | ASYNC_SETS | SYNC_SETS | GRAPH_LAUNCHES | HOST_FUNCS
               | VALUE_WAITS | VALUE_WRITES)
MODELLED = (STREAM_WORK | EVENT_RECORDS | EVENT_WAITS | SEES_STREAM_DONE | SEES_EVENT_DONE | SEES_CONTEXT_DONE
            | ALLOCS | ASYNC_ALLOCS | ASYNC_FREES | STREAM_CREATES | EVENT_CREATES | EVENT_DESTROYS | CAPTURE_BEGINS
            | CAPTURE_ENDS | INSTANTIATES | IPC_EXPORTS)
# The calls whose user stack the ordering findings name (the audit's extra callbacks hold them).
ORDERING_CALLBACKS = ("cuMemcpyAsync", "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoDAsync_v2",
                      "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemsetD8Async", "cuMemsetD32Async", "cuMemFreeAsync",
                      "cuMemAllocAsync", "cuStreamWaitEvent", "cuIpcGetMemHandle", "cuStreamEndCapture",
                      "cudaMemcpyAsync", "cudaMemcpy", "cudaMemsetAsync", "cudaMallocAsync", "cudaFreeAsync",
                      "cudaStreamWaitEvent", "cudaEventRecord", "cudaEventCreate", "cudaEventCreateWithFlags",
                      "cudaIpcGetMemHandle", "cudaStreamEndCapture")

# What the audit's allocator and library hooks note in the traced child (its notes' names, beside the calls).
POOL_ALLOC, POOL_FREE = "POOL_ALLOC", "POOL_FREE"  # a library pool's block handed out, handed back
RECORD_STREAM = "RECORD_STREAM"  # torch's Tensor.record_stream: the block's free waits for that stream too
LIBRARY_WAIT = "LIBRARY_EVENT_WAIT"  # a library's wait on an event it never created: no CUDA call at all
# a library's array read on the host, whose wait for its copy to the host makes no CUDA call (JAX learns that work
# finished from host functions it enqueued): that copy, and what its stream was ordered after, has finished
LIBRARY_READY = "LIBRARY_READY"
LIBRARY_NOT_WATCHED = "LIBRARY_NOT_WATCHED"  # a hook that could not be installed: what it would note is unseen

# The settings calls whose user stack the settings findings name (the audit's extra callbacks hold them).
SETTINGS_CALLBACKS = ("cuCtxSetLimit", "cudaDeviceSetLimit", "cudaSetDeviceFlags", "cuDevicePrimaryCtxSetFlags",
                      "cuDevicePrimaryCtxSetFlags_v2", "cuCtxSetFlags", "cuCtxSetCacheConfig",
                      "cudaDeviceSetCacheConfig", "cuCtxSetSharedMemConfig", "cuMemPoolSetAttribute",
                      "cudaMemPoolSetAttribute")

# Name prefixes (see the module docstring).
LAUNCH_PREFIXES = ("cuLaunchKernel", "cuLaunchCooperativeKernel", "cudaLaunchKernel", "cudaLaunchCooperativeKernel",
                   "cuGraphLaunch", "cudaGraphLaunch")  # kernels and graphs: what a sticky error can come from
CONTEXT_SYNC_PREFIXES = ("cuCtxSynchronize", "cudaDeviceSynchronize", "cudaThreadSynchronize")
STREAM_SYNC_PREFIXES = ("cuStreamSynchronize", "cudaStreamSynchronize")
STREAM_QUERY_PREFIXES = ("cuStreamQuery", "cudaStreamQuery")
EVENT_SYNC_PREFIXES = ("cuEventSynchronize", "cudaEventSynchronize")
CONTEXT_CHANGE_PREFIXES = ("cuCtxPushCurrent", "cuCtxPopCurrent", "cuCtxSetCurrent", "cuCtxCreate", "cuCtxDestroy")
ALLOCATION_PREFIXES = ("cuMemAlloc", "cudaMalloc", "cuMemCreate")
# a host function or a stream callback: the host runs it when the stream reaches it
HOST_CALLBACK_PREFIXES = ("cuLaunchHostFunc", "cudaLaunchHostFunc", "cudaStreamAddCallback", "cuStreamAddCallback")
# what holds a stream back on the GPU: an event it waits for, a value in memory (a batch may hold such a wait)
GPU_WAIT_PREFIXES = ("cuStreamWaitValue", "cuStreamWaitEvent", "cudaStreamWaitEvent", "cuStreamBatchMemOp")
# a call that ran work in its context (or made memory there): the context was used
CONTEXT_WORK_PREFIXES = ("cuLaunch", "cudaLaunch", "cuMemcpy", "cudaMemcpy", "cuMemset", "cudaMemset", "cuGraphLaunch",
                         "cudaGraphLaunch", "cuMemAlloc", "cudaMalloc", "cuMemCreate")
DRIVER_EVENT_RECORD_PREFIXES = ("cuEventRecord",)

# Exact recorded driver names the in-process hooks replay.
HOOKED_LAUNCHES = ("cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz",
                   "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz")
HOOKED_ALLOCATIONS = ("cuMemAlloc_v2", "cuMemAllocManaged", "cuMemAllocAsync", "cuMemAllocAsync_ptsz",
                      "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz", "cuMemAllocPitch_v2")
HOOKED_FREES = ("cuMemFree_v2", "cuMemFreeAsync", "cuMemFreeAsync_ptsz")


@functools.lru_cache(maxsize=4096)  # a program calls few distinct names, each many times
def base_name(name: str) -> str:
    """A call's name without its version and per-thread suffixes."""
    return _SUFFIX.sub("", name)


def per_thread(name: str) -> bool:
    """Whether the call is the per-thread default stream's variant (its NULL stream is the thread's own)."""
    return "_ptsz" in name or "_ptds" in name
