"""Look-alikes of the realworld ordering programs (examples/realworld/clean_*.py and order_*.py), as the calls
CuPy, PyTorch and cuda.bindings make for them, fed to the five ordering rules: correct programs the model
flags (false positives) and hazards it does not see (misses). Each test cites the program and the library
source it follows; each was a wrong answer of the model when it was written (a false positive or a
miss), fixed since."""

from __future__ import annotations

import pytest

from ctxlab.audit.rules.catalogue import RULES_BY_ID, judge
from tests.audit_events import WORKER
from tests.ordering_events import BASE, A, B, Calls

ORDERING_RULES = ("freed-while-in-use", "unordered-access", "wait-orders-nothing", "graph-replays-freed",
                  "ipc-interior-pointer")
NON_BLOCKING = 1
HOST = 0x5555_0000_0000  # a host buffer (pinned or pageable): not device memory the model knows
SEGMENT = 2 << 20  # PyTorch's small-pool segment: 2 MiB, blocks of <= 1 MiB packed into it


def findings(c: Calls, rule: str | None = None):
    found = judge(c.events, rules=[RULES_BY_ID[r] for r in ORDERING_RULES])
    return [f for f in found if rule is None or f.rule == rule]


def line_of(e: dict) -> int:
    return e["stack"][0][1]


def runtime(c: Calls, name: str, **args) -> dict:
    return c.at(name, domain="runtime", **args)


# ---------------------------------------------------------------- stream memory operations (cuStreamWaitValue32)


def test_clean_wait_value_pinned_download_post_then_sync():
    """examples/realworld/clean_wait_value_pinned_download_post_then_sync.py: receive() queues
    cuStreamWaitValue32(stream, doorbell, 1, GEQ) and then cuMemcpyDtoHAsync(header, rx) on its stream; the NIC
    thread then fills rx (cuMemsetD32Async on its own stream) and rings the doorbell (cuStreamWriteValue32). The
    copy cannot start before the doorbell is written, which is after the memset in the NIC stream's order: the
    copy is ordered after the write although it was enqueued first. ordering.Ordering._call drops both calls
    (not in events.MODELLED), and Ordering._touch takes the memset for a write after an unordered use."""
    c = Calls()
    rx, doorbell = BASE, BASE + (1 << 21)
    c.alloc(rx, 4 << 16)
    c.alloc(doorbell, 4)
    c.at("cuMemsetD32_v2", ptr=doorbell, count=1)
    c.stream(A, NON_BLOCKING)
    c.at("cuStreamWaitValue32_v2", stream=A)  # the tracer keeps no parameters for it (tracing/fields.py)
    c.d2h(rx, A)  # the header download, held back by the wait
    c.at("cuStreamSynchronize", stream=A, dur=1000)  # returns once the NIC rang the doorbell
    c.at("cuStreamCreate", stream=B, flags=NON_BLOCKING, tid=WORKER)
    c.at("cuMemsetD32Async", ptr=rx, count=1 << 16, stream=B, tid=WORKER)  # the packet
    c.at("cuStreamWriteValue32_v2", stream=B, tid=WORKER)  # the doorbell: releases the wait
    c.at("cuStreamSynchronize", stream=B, tid=WORKER)
    assert findings(c) == []


# ---------------------------------------------------------------- PyTorch's unsized pool blocks


def torch_segment(c: Calls, seg: int = BASE) -> None:
    """PyTorch's caching allocator maps a small-pool segment with cudaMalloc (CUDACachingAllocator.cpp
    alloc_block -> cudaMallocMaybeCapturing) and hands out blocks of it; its GPU trace gives only the
    pointer of each (allocators.AllocatorHooks.hook_torch: size 0)."""
    runtime(c, "cudaMalloc", ptr=seg, size=SEGMENT)


def torch_block(c: Calls, ptr: int, stream: int = 0) -> dict:
    return c.hook("POOL_ALLOC", ptr=ptr, size=0, stream=stream, library="PyTorch",
                  call="PyTorch's caching allocator malloc")


def test_small_activation_stashed_without_record_stream_is_missed():
    """order_torch_d2h_stash_without_record_stream.py with a small activation (<= 1 MiB: PyTorch packs it into a
    2 MiB small-pool segment beside the next tensor). The copy reads it on the offload stream (a non-blocking
    pool stream: c10/cuda/CUDAStream.cpp kDefaultFlags = cudaStreamNonBlocking), `del act` hands it back to the
    default stream's pool: the same freed-while-in-use as the program. Memory.allocated filters out every inner
    block that overlaps the new one before it trims the unsized one that reaches past it, so the activation's
    block is gone from the model when `grad` is allocated after it; its POOL_FREE then finds the segment (no
    stream) and is dropped by Ordering._note."""
    c = Calls()
    c.stream(B, NON_BLOCKING)  # the offload stream
    torch_segment(c)
    torch_block(c, BASE)  # act
    torch_block(c, BASE + 4096)  # the next small tensor, same segment
    use = runtime(c, "cudaMemcpyAsync", ptr=HOST, src=BASE, size=4096, kind=2, stream=B)  # stash.copy_(act)
    free = c.hook("POOL_FREE", ptr=BASE, library="PyTorch", call="PyTorch's caching allocator free")  # del act
    [f] = findings(c, "freed-while-in-use")
    assert f.location.line == line_of(free) and f.because.location.line == line_of(use)


def test_clean_inference_workers_read_small_weights_on_two_streams():
    """clean_inference_workers_set_device.py: the module's weights and biases are small tensors in one
    small-pool segment, written by `.cuda()` (cudaMemcpyAsync + cudaStreamSynchronize on the default stream,
    at::cuda::memcpy_and_sync) and read by each worker's GEMMs on its own pool stream after
    torch.cuda.synchronize(). On H100, cuBLAS launches its GEMMs through the driver (cuLaunchKernelEx, see
    HAMi-core PR #143 and triton PR #3668), so the argument words are kept and point into the weights. The
    weight block was dropped when the bias after it was handed out (Memory.allocated), so the GEMM's pointer
    lands on the segment's cudaMalloc block, untouched (fresh): Memory.kernel_touches makes the first worker's
    GEMM its writer, and the second worker's GEMM an unordered read after it."""
    c = Calls()
    c.stream(A, NON_BLOCKING)
    c.stream(B, NON_BLOCKING)
    torch_segment(c)
    weight, bias = BASE, BASE + 0x8000
    for ptr in (weight, bias):  # module.cuda(): empty + copy_ per parameter
        torch_block(c, ptr)
        runtime(c, "cudaMemcpyAsync", ptr=ptr, src=HOST, size=512, kind=1, stream=0)
        runtime(c, "cudaStreamSynchronize", stream=0)
    runtime(c, "cudaDeviceSynchronize", dur=5)
    out_a, out_b = BASE + (4 << 20), BASE + (8 << 20)  # each worker's output, in its own stream's segment
    c.alloc(out_a, SEGMENT)
    c.alloc(out_b, SEGMENT)
    c.kernel(A, weight, bias, out_a)
    c.kernel(B, weight, bias, out_b)
    assert findings(c) == []


def test_unsized_blocks_handed_out_in_address_order_are_each_tracked():
    """The narrowest form of the two above, on the model itself: after two unsized blocks are handed out in
    address order, the first is still a block of its own, ending where the second begins (the trimming loop in
    Memory.allocated never sees it: the overlap filter just before it has already removed it)."""
    from ctxlab.audit.model.ordering import ordering_of

    c = Calls()
    torch_segment(c)
    torch_block(c, BASE)
    torch_block(c, BASE + 4096)
    memory = ordering_of(c.events).memory
    first = memory.at(BASE)
    assert first is not memory.outer(BASE) and (first.base, first.end) == (BASE, BASE + 4096)


# ---------------------------------------------------------------- PyTorch's CUDA graph private pool


def test_torch_graph_intermediate_freed_after_capture_is_not_replay_of_freed_memory():
    """The torch.cuda.graph idiom (not one of the 27 programs; a look-alike of clean_order_graph_input_kept_alive):
    `static_out = model(static_in)` is captured; its intermediates are allocated during the capture and dropped
    by Python right after it; graph.replay() launches the graph again. CUDACachingAllocator.cpp, Note
    [Interaction with CUDA graph capture]: allocations during capture come from a graph-private pool, and the
    allocator "doesn't begin cudaFreeing those addresses until the graph is destroyed" -- the replay's
    intermediates are safe. The caching allocator's trace still reports the free (NativeCachingAllocator::free
    calls trace_gpu_memory_deallocation for every block), Ordering._note removes the block, and
    Ordering._graph_launch reports graph-replays-freed for the captured GEMM's (cuLaunchKernelEx) use of it."""
    c = Calls()
    c.stream(A, NON_BLOCKING)
    torch_segment(c)
    static_in = c.alloc(BASE + (4 << 20), SEGMENT)["args"]["ptr"]
    runtime(c, "cudaStreamBeginCapture", stream=A, mode=0)
    torch_block(c, BASE, stream=A)  # the intermediate, from the graph's private pool
    c.kernel(A, static_in, BASE)
    runtime(c, "cudaStreamEndCapture", stream=A, graph=0x6A)
    runtime(c, "cudaGraphInstantiateWithFlags", graph=0x6A, exec=0x6E)
    c.hook("POOL_FREE", ptr=BASE, library="PyTorch", call="PyTorch's caching allocator free")
    runtime(c, "cudaGraphLaunch", exec=0x6E, stream=A)  # graph.replay()
    assert findings(c) == []


# ---------------------------------------------------------------- "synchronous" memsets and device copies


def test_legacy_memset_then_non_blocking_kernel_without_sync_is_missed():
    """order_kernel_reads_upload_in_flight.py with the input zeroed by cuMemsetD32 and no cuCtxSynchronize
    before the non-blocking stream's kernel reads it. CUDA Runtime API, "API synchronization behavior":
    "The synchronous memset functions are asynchronous with respect to the host except when the target is
    pinned host memory or a Unified Memory region" (and a device-to-device cudaMemcpy/cuMemcpyDtoD performs no
    host-side synchronisation). The memset runs on the legacy stream, which a non-blocking stream does not
    wait for: the kernel may read the buffer before it is zeroed. Ordering._work calls _host_sees for every
    SYNC_SETS/SYNC_COPIES call, so the host clock (merged into the kernel's stream) orders it."""
    c = Calls()
    c.alloc(BASE, 1 << 20)
    c.alloc(BASE + (1 << 21), 1 << 20)
    write = c.at("cuMemsetD32_v2", ptr=BASE, count=1 << 18)
    c.stream(B, NON_BLOCKING)
    read = c.kernel(B, BASE + (1 << 21), BASE)
    [f] = findings(c, "unordered-access")
    assert f.location.line == line_of(read) and f.because.location.line == line_of(write)


# ---------------------------------------------------------------- what comes out right


def test_order_asnumpy_null_stream_copy_after_side_stream_kernel():
    """order_asnumpy_null_stream_before_side_stream.py as CuPy makes it: cupy.zeros is cudaMemsetAsync on the
    null stream (memory.pyx memset_async), the kernel is cuLaunchKernel on the non-blocking stream
    (stream.pyx: cudaStreamCreateWithPriority(streamNonBlocking)), and cupy.asnumpy is ndarray.get ->
    copy_to_host_async (cudaMemcpyAsync on the current, null, stream) + stream.synchronize (core.pyx)."""
    c = Calls()
    runtime(c, "cudaStreamCreateWithPriority", stream=A, flags=NON_BLOCKING)
    runtime(c, "cudaMalloc", ptr=BASE, size=16 << 20)
    c.hook("POOL_ALLOC", ptr=BASE, size=16 << 20, stream=0, library="CuPy")
    runtime(c, "cudaMemsetAsync", ptr=BASE, size=16 << 20, stream=0)
    runtime(c, "cudaStreamSynchronize", stream=0)
    cause = c.kernel(A, BASE)
    hazard = runtime(c, "cudaMemcpyAsync", ptr=HOST, src=BASE, size=16 << 20, kind=2, stream=0)
    runtime(c, "cudaStreamSynchronize", stream=0)
    [f] = findings(c)
    assert f.rule == "unordered-access"
    assert f.location.line == line_of(hazard) and f.because.location.line == line_of(cause)


def test_a_torch_block_alone_in_its_segment_is_judged():
    """The control of the small-activation miss: order_torch_d2h_stash_without_record_stream.py's 64 MiB
    activation has a segment of its own (CUDACachingAllocator.cpp: large requests over 10 MiB get their own
    rounded cudaMalloc), so the unsized block stays in the model and the program's finding comes out."""
    c = Calls()
    c.stream(B, NON_BLOCKING)
    torch_segment(c)
    torch_block(c, BASE)
    use = runtime(c, "cudaMemcpyAsync", ptr=HOST, src=BASE, size=4096, kind=2, stream=B)
    free = c.hook("POOL_FREE", ptr=BASE, library="PyTorch", call="PyTorch's caching allocator free")
    [f] = findings(c)
    assert f.rule == "freed-while-in-use"
    assert f.location.line == line_of(free) and f.because.location.line == line_of(use)


@pytest.mark.parametrize("ordered", [False, True])
def test_cupy_pool_del_while_side_stream_reads(ordered):
    """order_cupy_pool_del_while_side_stream_reads.py and its clean twin: memory.pyx SingleDeviceMemoryPool
    files a chunk under the current stream's arena and free() puts it back into chunk.arena (the allocation
    stream's); stream.pyx record() is cudaEventCreateWithFlags + cudaEventRecord, wait_event is
    cudaStreamWaitEvent."""
    c = Calls()
    stage, scoring = A, B
    for s in (stage, scoring):
        runtime(c, "cudaStreamCreateWithPriority", stream=s, flags=NON_BLOCKING)
    runtime(c, "cudaMalloc", ptr=BASE, size=16 << 20)
    c.hook("POOL_ALLOC", ptr=BASE, size=16 << 20, stream=stage, library="CuPy")
    c.kernel(stage, BASE)  # cupy.full: the fill kernel
    runtime(c, "cudaEventCreateWithFlags", event=0xE1)  # scoring.wait_event(stage.record())
    runtime(c, "cudaEventRecord", event=0xE1, stream=stage)
    runtime(c, "cudaStreamWaitEvent", stream=scoring, event=0xE1)
    c.alloc(BASE + (32 << 20), 16 << 20)  # the scores (pool detail left out)
    cause = c.kernel(scoring, BASE + (32 << 20), BASE)
    if ordered:
        runtime(c, "cudaEventCreateWithFlags", event=0xE2)
        runtime(c, "cudaEventRecord", event=0xE2, stream=scoring)
        runtime(c, "cudaStreamWaitEvent", stream=stage, event=0xE2)
    hazard = c.hook("POOL_FREE", ptr=BASE, library="CuPy", call="CuPy's pool free")
    if ordered:
        assert findings(c) == []
    else:
        [f] = findings(c)
        assert f.rule == "freed-while-in-use"
        assert f.location.line == line_of(hazard) and f.because.location.line == line_of(cause)
