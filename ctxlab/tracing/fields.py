"""Which parameters of which driver calls the tracer keeps, read by its C callback at the call's entry or exit.

Offsets are those of the ``<function>_params`` structs in CUPTI's ``generated_cuda_meta.h`` (each member at
its natural alignment: pointers and handles 8 bytes, ``int``/``unsigned int`` 4). An output parameter
(``CUcontext *pctx``) is read through its pointer at the exit; a value parameter at the entry. The values
land in each call's ``args``: handles the audit's rules follow (which context made a stream or an event,
which context a push or a destroy named) and the allocations its pointer rule maps.
"""

from __future__ import annotations

ENTER, EXIT = 0, 1
VALUE, DEREF = 0, 1

# name -> ((arg, site, offset, deref, inner offset, width), ...): at most five a function
_OUT_CTX = (("ctx", EXIT, 0, DEREF, 0, 8),)
_IN_CTX = (("ctx", ENTER, 0, VALUE, 0, 8),)
_STREAM_AT = {24: (("stream", ENTER, 24, VALUE, 0, 8),), 40: (("stream", ENTER, 40, VALUE, 0, 8),)}
# A launch's configuration, two 32-bit values a field: (gridDimX | gridDimY << 32), (blockDimX | blockDimY << 32),
# (blockDimZ | sharedMemBytes << 32); launch_shape() takes them apart.
_SHAPE = (("grid_xy", ENTER, 8, VALUE, 0, 8), ("block_xy", ENTER, 20, VALUE, 0, 8),
          ("block_z_shared", ENTER, 28, VALUE, 0, 8))
# cuLaunchKernelEx: the same members at the start of *config (CUlaunchConfig)
_SHAPE_EX = (("grid_xy", ENTER, 0, DEREF, 0, 8), ("block_xy", ENTER, 0, DEREF, 12, 8),
             ("block_z_shared", ENTER, 0, DEREF, 20, 8))
_CAPTURE_BEGIN = (("stream", ENTER, 0, VALUE, 0, 8), ("mode", ENTER, 8, VALUE, 0, 4))
_STREAM_FIRST = (("stream", ENTER, 0, VALUE, 0, 8),)
_COPY = (("ptr", ENTER, 0, VALUE, 0, 8), ("src", ENTER, 8, VALUE, 0, 8))
_SIZE16 = ("size", ENTER, 16, VALUE, 0, 8)  # ByteCount of a copy
_COUNT16 = ("count", ENTER, 16, VALUE, 0, 8)  # N (elements) of a memset
_END_CAPTURE = (("stream", ENTER, 0, VALUE, 0, 8), ("graph", EXIT, 8, DEREF, 0, 8))
_INSTANTIATE = (("exec", EXIT, 0, DEREF, 0, 8), ("graph", ENTER, 8, VALUE, 0, 8))
_GRAPH_LAUNCH = (("exec", ENTER, 0, VALUE, 0, 8), ("stream", ENTER, 8, VALUE, 0, 8))

FIELDS: dict[str, tuple[tuple[str, int, int, int, int, int], ...]] = {
    "cuCtxCreate_v2": (*_OUT_CTX, ("device", ENTER, 12, VALUE, 0, 4)),
    "cuCtxCreate_v3": (*_OUT_CTX, ("device", ENTER, 24, VALUE, 0, 4)),
    "cuCtxCreate_v4": (*_OUT_CTX, ("device", ENTER, 20, VALUE, 0, 4)),
    "cuCtxDestroy_v2": _IN_CTX,
    "cuCtxPushCurrent_v2": _IN_CTX,
    "cuCtxPopCurrent_v2": _OUT_CTX,
    "cuCtxSetCurrent": _IN_CTX,
    "cuCtxGetCurrent": _OUT_CTX,
    "cuCtxEnablePeerAccess": (("peer", ENTER, 0, VALUE, 0, 8),),
    "cuCtxFromGreenCtx": (*_OUT_CTX, ("green", ENTER, 8, VALUE, 0, 8)),
    "cuDevicePrimaryCtxRetain": (*_OUT_CTX, ("device", ENTER, 8, VALUE, 0, 4)),
    "cuDevicePrimaryCtxRelease": (("device", ENTER, 0, VALUE, 0, 4),),
    "cuDevicePrimaryCtxRelease_v2": (("device", ENTER, 0, VALUE, 0, 4),),
    "cuDevicePrimaryCtxReset": (("device", ENTER, 0, VALUE, 0, 4),),
    "cuDevicePrimaryCtxReset_v2": (("device", ENTER, 0, VALUE, 0, 4),),
    "cuStreamCreate": (("stream", EXIT, 0, DEREF, 0, 8), ("flags", ENTER, 8, VALUE, 0, 4)),
    "cuStreamCreateWithPriority": (("stream", EXIT, 0, DEREF, 0, 8), ("flags", ENTER, 8, VALUE, 0, 4)),
    "cuStreamDestroy_v2": (("stream", ENTER, 0, VALUE, 0, 8),),
    "cuStreamSynchronize": (("stream", ENTER, 0, VALUE, 0, 8),),
    "cuStreamSynchronize_ptsz": (("stream", ENTER, 0, VALUE, 0, 8),),
    "cuStreamWaitEvent": (("stream", ENTER, 0, VALUE, 0, 8), ("event", ENTER, 8, VALUE, 0, 8)),
    "cuStreamWaitEvent_ptsz": (("stream", ENTER, 0, VALUE, 0, 8), ("event", ENTER, 8, VALUE, 0, 8)),
    "cuEventCreate": (("event", EXIT, 0, DEREF, 0, 8),),
    "cuEventDestroy_v2": (("event", ENTER, 0, VALUE, 0, 8),),
    "cuEventRecord": (("event", ENTER, 0, VALUE, 0, 8), ("stream", ENTER, 8, VALUE, 0, 8)),
    "cuEventRecord_ptsz": (("event", ENTER, 0, VALUE, 0, 8), ("stream", ENTER, 8, VALUE, 0, 8)),
    "cuEventRecordWithFlags": (("event", ENTER, 0, VALUE, 0, 8), ("stream", ENTER, 8, VALUE, 0, 8)),
    "cuEventRecordWithFlags_ptsz": (("event", ENTER, 0, VALUE, 0, 8), ("stream", ENTER, 8, VALUE, 0, 8)),
    "cuEventSynchronize": (("event", ENTER, 0, VALUE, 0, 8),),
    "cuEventQuery": (("event", ENTER, 0, VALUE, 0, 8),),
    # (float *pMilliseconds, CUevent hStart, CUevent hEnd)
    "cuEventElapsedTime": (("event", ENTER, 8, VALUE, 0, 8), ("end_event", ENTER, 16, VALUE, 0, 8)),
    "cuEventElapsedTime_v2": (("event", ENTER, 8, VALUE, 0, 8), ("end_event", ENTER, 16, VALUE, 0, 8)),
    "cuLaunchKernel": (("function", ENTER, 0, VALUE, 0, 8), *_STREAM_AT[40], *_SHAPE),
    "cuLaunchKernel_ptsz": (("function", ENTER, 0, VALUE, 0, 8), *_STREAM_AT[40], *_SHAPE),
    "cuLaunchCooperativeKernel": (("function", ENTER, 0, VALUE, 0, 8), *_STREAM_AT[40], *_SHAPE),
    "cuLaunchCooperativeKernel_ptsz": (("function", ENTER, 0, VALUE, 0, 8), *_STREAM_AT[40], *_SHAPE),
    # (const CUlaunchConfig *config, CUfunction f, ...): the stream is config->hStream, at 32 in the config
    "cuLaunchKernelEx": (("function", ENTER, 8, VALUE, 0, 8), ("stream", ENTER, 0, DEREF, 32, 8), *_SHAPE_EX),
    "cuLaunchKernelEx_ptsz": (("function", ENTER, 8, VALUE, 0, 8), ("stream", ENTER, 0, DEREF, 32, 8), *_SHAPE_EX),
    # (CUstream hStream, CUhostFn fn, void *userData)
    "cuLaunchHostFunc": _STREAM_FIRST, "cuLaunchHostFunc_ptsz": _STREAM_FIRST,
    "cuStreamBeginCapture": _STREAM_FIRST, "cuStreamBeginCapture_ptsz": _STREAM_FIRST,
    "cuStreamBeginCapture_v2": _CAPTURE_BEGIN, "cuStreamBeginCapture_v2_ptsz": _CAPTURE_BEGIN,
    "cuStreamEndCapture": _END_CAPTURE, "cuStreamEndCapture_ptsz": _END_CAPTURE,
    "cuStreamQuery": _STREAM_FIRST, "cuStreamQuery_ptsz": _STREAM_FIRST,
    # stream memory operations: a wait on a value holds its stream back until something writes it
    "cuStreamWaitValue32_v2": _STREAM_FIRST, "cuStreamWaitValue32_v2_ptsz": _STREAM_FIRST,
    "cuStreamWaitValue64_v2": _STREAM_FIRST, "cuStreamWaitValue64_v2_ptsz": _STREAM_FIRST,
    "cuStreamWriteValue32_v2": _STREAM_FIRST, "cuStreamWriteValue32_v2_ptsz": _STREAM_FIRST,
    "cuStreamWriteValue64_v2": _STREAM_FIRST, "cuStreamWriteValue64_v2_ptsz": _STREAM_FIRST,
    "cuStreamBatchMemOp_v2": _STREAM_FIRST, "cuStreamBatchMemOp_v2_ptsz": _STREAM_FIRST,
    # copies and memsets: the device pointer(s), the byte or element count (ctxlab.audit.model.ordering sizes them)
    "cuMemcpyAsync": (*_COPY, _SIZE16, *_STREAM_AT[24]), "cuMemcpyAsync_ptsz": (*_COPY, _SIZE16, *_STREAM_AT[24]),
    "cuMemcpyHtoDAsync_v2": (("ptr", ENTER, 0, VALUE, 0, 8), _SIZE16, *_STREAM_AT[24]),
    "cuMemcpyHtoDAsync_v2_ptsz": (("ptr", ENTER, 0, VALUE, 0, 8), _SIZE16, *_STREAM_AT[24]),
    "cuMemcpyDtoHAsync_v2": (("src", ENTER, 8, VALUE, 0, 8), _SIZE16, *_STREAM_AT[24]),
    "cuMemcpyDtoHAsync_v2_ptsz": (("src", ENTER, 8, VALUE, 0, 8), _SIZE16, *_STREAM_AT[24]),
    "cuMemcpyDtoDAsync_v2": (*_COPY, _SIZE16, *_STREAM_AT[24]),
    "cuMemcpyDtoDAsync_v2_ptsz": (*_COPY, _SIZE16, *_STREAM_AT[24]),
    "cuMemcpy": (*_COPY, _SIZE16), "cuMemcpyDtoD_v2": (*_COPY, _SIZE16),
    "cuMemsetD8Async": (("ptr", ENTER, 0, VALUE, 0, 8), _COUNT16, *_STREAM_AT[24]),
    "cuMemsetD32Async": (("ptr", ENTER, 0, VALUE, 0, 8), _COUNT16, *_STREAM_AT[24]),
    "cuMemsetD8_v2": (("ptr", ENTER, 0, VALUE, 0, 8), _COUNT16),
    "cuMemsetD32_v2": (("ptr", ENTER, 0, VALUE, 0, 8), _COUNT16),
    "cuMemcpyDtoH_v2": (("src", ENTER, 8, VALUE, 0, 8), _SIZE16),
    "cuMemcpyHtoD_v2": (("ptr", ENTER, 0, VALUE, 0, 8), _SIZE16),
    # graphs: what a capture made, what was instantiated from it, what is launched where
    "cuGraphInstantiateWithFlags": _INSTANTIATE, "cuGraphInstantiate_v2": _INSTANTIATE,
    "cuGraphInstantiateWithParams": _INSTANTIATE, "cuGraphInstantiateWithParams_ptsz": _INSTANTIATE,
    "cuGraphLaunch": _GRAPH_LAUNCH, "cuGraphLaunch_ptsz": _GRAPH_LAUNCH,
    # (CUipcMemHandle *pHandle, CUdeviceptr dptr): the pointer exported
    "cuIpcGetMemHandle": (("ptr", ENTER, 8, VALUE, 0, 8),),
    "cuMemAlloc_v2": (("ptr", EXIT, 0, DEREF, 0, 8), ("size", ENTER, 8, VALUE, 0, 8)),
    "cuMemAllocManaged": (("ptr", EXIT, 0, DEREF, 0, 8), ("size", ENTER, 8, VALUE, 0, 8)),
    "cuMemAllocAsync": (("ptr", EXIT, 0, DEREF, 0, 8), ("size", ENTER, 8, VALUE, 0, 8),
                        ("stream", ENTER, 16, VALUE, 0, 8)),
    "cuMemAllocAsync_ptsz": (("ptr", EXIT, 0, DEREF, 0, 8), ("size", ENTER, 8, VALUE, 0, 8),
                             ("stream", ENTER, 16, VALUE, 0, 8)),
    "cuMemAllocFromPoolAsync": (("ptr", EXIT, 0, DEREF, 0, 8), ("size", ENTER, 8, VALUE, 0, 8),
                                ("stream", ENTER, 24, VALUE, 0, 8)),
    "cuMemAllocFromPoolAsync_ptsz": (("ptr", EXIT, 0, DEREF, 0, 8), ("size", ENTER, 8, VALUE, 0, 8),
                                     ("stream", ENTER, 24, VALUE, 0, 8)),
    # (CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height, ...): size = pitch * height
    "cuMemAllocPitch_v2": (("ptr", EXIT, 0, DEREF, 0, 8), ("pitch", EXIT, 8, DEREF, 0, 8),
                           ("height", ENTER, 24, VALUE, 0, 8)),
    "cuMemFree_v2": (("ptr", ENTER, 0, VALUE, 0, 8),),
    "cuMemFreeAsync": (("ptr", ENTER, 0, VALUE, 0, 8), ("stream", ENTER, 8, VALUE, 0, 8)),
    "cuMemFreeAsync_ptsz": (("ptr", ENTER, 0, VALUE, 0, 8), ("stream", ENTER, 8, VALUE, 0, 8)),
    "cuMemGetAddressRange_v2": (("ptr", ENTER, 16, VALUE, 0, 8),),
    "cuPointerGetAttribute": (("ptr", ENTER, 16, VALUE, 0, 8),),
    "cuModuleLoad": (("module", EXIT, 0, DEREF, 0, 8),),
    "cuModuleLoadData": (("module", EXIT, 0, DEREF, 0, 8),),
    "cuModuleLoadDataEx": (("module", EXIT, 0, DEREF, 0, 8),),
    "cuModuleLoadFatBinary": (("module", EXIT, 0, DEREF, 0, 8),),
    "cuModuleGetFunction": (("function", EXIT, 0, DEREF, 0, 8), ("module", ENTER, 8, VALUE, 0, 8)),
    "cuModuleUnload": (("module", ENTER, 0, VALUE, 0, 8),),
    "cuKernelGetFunction": (("function", EXIT, 0, DEREF, 0, 8),),
    # settings (ctxlab.audit.rules.settings): limits, flags, cache and shared memory configuration, pool attributes
    "cuCtxSetLimit": (("limit", ENTER, 0, VALUE, 0, 4), ("value", ENTER, 8, VALUE, 0, 8)),
    "cuCtxSetFlags": (("flags", ENTER, 0, VALUE, 0, 4),),
    "cuCtxSetCacheConfig": (("config", ENTER, 0, VALUE, 0, 4),),
    "cuCtxSetSharedMemConfig": (("config", ENTER, 0, VALUE, 0, 4),),
    "cuDevicePrimaryCtxSetFlags": (("device", ENTER, 0, VALUE, 0, 4), ("flags", ENTER, 4, VALUE, 0, 4)),
    "cuDevicePrimaryCtxSetFlags_v2": (("device", ENTER, 0, VALUE, 0, 4), ("flags", ENTER, 4, VALUE, 0, 4)),
    # (CUmemoryPool pool, CUmemPool_attribute attr, void *value): *value read as 8 bytes (an int attribute's
    # upper half is dropped by the audit)
    "cuMemPoolSetAttribute": (("pool", ENTER, 0, VALUE, 0, 8), ("attr", ENTER, 8, VALUE, 0, 4),
                              ("value", ENTER, 16, DEREF, 0, 8)),
}

# Launches whose kernel arguments the audit's pointer rule reads: (offset of f, of kernelParams, of extra).
LAUNCH_ARGUMENTS: dict[str, tuple[int, int, int]] = {
    "cuLaunchKernel": (0, 48, 56), "cuLaunchKernel_ptsz": (0, 48, 56),
    "cuLaunchKernelEx": (8, 16, 24), "cuLaunchKernelEx_ptsz": (8, 16, 24),
    "cuLaunchCooperativeKernel": (0, 48, -1), "cuLaunchCooperativeKernel_ptsz": (0, 48, -1),
}

# Runtime functions (CUPTI's names, with their version suffix) whose parameters are kept.
# cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem, cudaStream_t s)
_RUNTIME_LAUNCH = (("grid_xy", ENTER, 8, VALUE, 0, 8), ("block_xy", ENTER, 20, VALUE, 0, 8),
                   ("block_z_shared", ENTER, 28, VALUE, 0, 4), ("shared", ENTER, 40, VALUE, 0, 8),
                   ("stream", ENTER, 48, VALUE, 0, 8))
_EVENT_STREAM = (("event", ENTER, 0, VALUE, 0, 8), ("stream", ENTER, 8, VALUE, 0, 8))
_STREAM_EVENT = (("stream", ENTER, 0, VALUE, 0, 8), ("event", ENTER, 8, VALUE, 0, 8))
# cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
_RUNTIME_COPY = (("ptr", ENTER, 0, VALUE, 0, 8), ("src", ENTER, 8, VALUE, 0, 8), _SIZE16,
                 ("kind", ENTER, 24, VALUE, 0, 4))
_RUNTIME_COPY_ASYNC = (*_RUNTIME_COPY, ("stream", ENTER, 32, VALUE, 0, 8))
RUNTIME_FIELDS: dict[str, tuple[tuple[str, int, int, int, int, int], ...]] = {
    "cudaSetDevice_v3020": (("device", ENTER, 0, VALUE, 0, 4),),
    "cudaLaunchKernel_v7000": _RUNTIME_LAUNCH, "cudaLaunchKernel_ptsz_v7000": _RUNTIME_LAUNCH,
    "cudaStreamBeginCapture_v10000": _CAPTURE_BEGIN, "cudaStreamBeginCapture_ptsz_v10000": _CAPTURE_BEGIN,
    "cudaStreamEndCapture_v10000": _END_CAPTURE, "cudaStreamEndCapture_ptsz_v10000": _END_CAPTURE,
    "cudaStreamSynchronize_v3020": _STREAM_FIRST, "cudaStreamSynchronize_ptsz_v7000": _STREAM_FIRST,
    "cudaMalloc_v3020": (("ptr", EXIT, 0, DEREF, 0, 8), ("size", ENTER, 8, VALUE, 0, 8)),
    "cudaFree_v3020": (("ptr", ENTER, 0, VALUE, 0, 8),),
    "cudaInitDevice_v12000": (("device", ENTER, 0, VALUE, 0, 4),),
    # the ordering model's (ctxlab.audit.model.ordering): streams, events, copies, memsets, graphs, IPC
    "cudaStreamCreate_v3020": (("stream", EXIT, 0, DEREF, 0, 8),),
    "cudaStreamCreateWithFlags_v5000": (("stream", EXIT, 0, DEREF, 0, 8), ("flags", ENTER, 8, VALUE, 0, 4)),
    "cudaStreamCreateWithPriority_v5050": (("stream", EXIT, 0, DEREF, 0, 8), ("flags", ENTER, 8, VALUE, 0, 4)),
    "cudaEventCreate_v3020": (("event", EXIT, 0, DEREF, 0, 8),),
    "cudaEventCreateWithFlags_v3020": (("event", EXIT, 0, DEREF, 0, 8),),
    "cudaEventDestroy_v3020": (("event", ENTER, 0, VALUE, 0, 8),),
    "cudaEventRecord_v3020": _EVENT_STREAM, "cudaEventRecord_ptsz_v7000": _EVENT_STREAM,
    "cudaEventRecordWithFlags_v11010": _EVENT_STREAM, "cudaEventRecordWithFlags_ptsz_v11010": _EVENT_STREAM,
    "cudaStreamWaitEvent_v3020": _STREAM_EVENT, "cudaStreamWaitEvent_ptsz_v7000": _STREAM_EVENT,
    "cudaEventSynchronize_v3020": (("event", ENTER, 0, VALUE, 0, 8),),
    "cudaEventQuery_v3020": (("event", ENTER, 0, VALUE, 0, 8),),
    "cudaStreamQuery_v3020": _STREAM_FIRST, "cudaStreamQuery_ptsz_v7000": _STREAM_FIRST,
    "cudaMemcpyAsync_v3020": _RUNTIME_COPY_ASYNC, "cudaMemcpyAsync_ptsz_v7000": _RUNTIME_COPY_ASYNC,
    "cudaMemcpy_v3020": _RUNTIME_COPY, "cudaMemcpy_ptds_v7000": _RUNTIME_COPY,
    # (void *devPtr, int value, size_t count, cudaStream_t stream)
    "cudaMemsetAsync_v3020": (("ptr", ENTER, 0, VALUE, 0, 8), _SIZE16, ("stream", ENTER, 24, VALUE, 0, 8)),
    "cudaMemsetAsync_ptsz_v7000": (("ptr", ENTER, 0, VALUE, 0, 8), _SIZE16, ("stream", ENTER, 24, VALUE, 0, 8)),
    "cudaMemset_v3020": (("ptr", ENTER, 0, VALUE, 0, 8), _SIZE16),
    "cudaMallocAsync_v11020": (("ptr", EXIT, 0, DEREF, 0, 8), ("size", ENTER, 8, VALUE, 0, 8),
                               ("stream", ENTER, 16, VALUE, 0, 8)),
    "cudaMallocAsync_ptsz_v11020": (("ptr", EXIT, 0, DEREF, 0, 8), ("size", ENTER, 8, VALUE, 0, 8),
                                    ("stream", ENTER, 16, VALUE, 0, 8)),
    "cudaFreeAsync_v11020": (("ptr", ENTER, 0, VALUE, 0, 8), ("stream", ENTER, 8, VALUE, 0, 8)),
    "cudaFreeAsync_ptsz_v11020": (("ptr", ENTER, 0, VALUE, 0, 8), ("stream", ENTER, 8, VALUE, 0, 8)),
    "cudaGraphInstantiate_v10000": _INSTANTIATE, "cudaGraphInstantiate_v12000": _INSTANTIATE,
    "cudaGraphInstantiateWithFlags_v11040": _INSTANTIATE, "cudaGraphInstantiateWithParams_v12000": _INSTANTIATE,
    "cudaGraphInstantiateWithParams_ptsz_v12000": _INSTANTIATE,
    "cudaGraphLaunch_v10000": _GRAPH_LAUNCH, "cudaGraphLaunch_ptsz_v10000": _GRAPH_LAUNCH,
    "cudaLaunchHostFunc_v10000": _STREAM_FIRST, "cudaLaunchHostFunc_ptsz_v10000": _STREAM_FIRST,
    # (cudaIpcMemHandle_t *handle, void *devPtr)
    "cudaIpcGetMemHandle_v4010": (("ptr", ENTER, 8, VALUE, 0, 8),),
    # settings (ctxlab.audit.rules.settings)
    "cudaDeviceSetLimit_v3020": (("limit", ENTER, 0, VALUE, 0, 4), ("value", ENTER, 8, VALUE, 0, 8)),
    "cudaSetDeviceFlags_v3020": (("flags", ENTER, 0, VALUE, 0, 4),),
    "cudaDeviceSetCacheConfig_v3020": (("config", ENTER, 0, VALUE, 0, 4),),
    "cudaMemPoolSetAttribute_v11020": (("pool", ENTER, 0, VALUE, 0, 8), ("attr", ENTER, 8, VALUE, 0, 4),
                                       ("value", ENTER, 16, DEREF, 0, 8)),
}


def launch_shape(args: dict[str, int]) -> tuple[tuple[int, int, int], tuple[int, int, int], int] | None:
    """A launch's (grid, block, dynamic shared memory bytes) from its kept parameters; None where not kept."""
    if "block_xy" not in args:
        return None
    grid, block, zs = args.get("grid_xy", 0), args["block_xy"], args.get("block_z_shared", 0)
    shared = args["shared"] if "shared" in args else zs >> 32
    return ((grid & 0xFFFFFFFF, grid >> 32, 0), (block & 0xFFFFFFFF, block >> 32, zs & 0xFFFFFFFF), shared)


def named_args(name: str, values: tuple[int, ...], runtime: bool = False) -> dict[str, int]:
    """A call's kept parameters by name (``a``, ``b``, ``c`` of its record, in FIELDS' order)."""
    fields = (RUNTIME_FIELDS if runtime else FIELDS).get(name)
    if not fields:
        return {}
    return {field[0]: int(value) for field, value in zip(fields, values, strict=False)}
