"""The ordering model and its rules on recorded-shape streams: each hazard, and each thing that orders it away
(an event waited for, a synchronisation that returned, the legacy stream's implicit synchronisation, the
stream itself, record_stream), so every condition of each rule has a case that breaks it."""

from __future__ import annotations

import pytest

from ctxlab.audit.events import ASYNC_COPIES, SYNC_FREES, base_name
from ctxlab.audit.model.ordering import ordering_of
from ctxlab.audit.rules.catalogue import RULES_BY_ID, judge
from tests.audit_events import MAIN, WORKER
from tests.ordering_events import BASE, A, B, C, Calls, launch_blob

ORDERING_RULES = ("freed-while-in-use", "unordered-access", "wait-orders-nothing", "graph-replays-freed",
                  "ipc-interior-pointer")
NON_BLOCKING = 1
OTHER = BASE + (1 << 21)  # a second allocation


def findings(c: Calls, rule: str | None = None):
    found = judge(c.events, rules=[RULES_BY_ID[r] for r in ORDERING_RULES])
    return [f for f in found if rule is None or f.rule == rule]


def line_of(e: dict) -> int:
    return e["stack"][0][1]


def two_streams(flags: int = NON_BLOCKING) -> Calls:
    c = Calls()
    c.stream(A, flags)
    c.stream(B, flags)
    c.alloc()
    c.alloc(OTHER)
    return c


# ---------------------------------------------------------------- unordered-access


def test_a_read_on_another_stream_after_a_kernel_wrote_is_unordered():
    c = two_streams()
    wrote = c.kernel(A, BASE)
    read = c.d2h(BASE, B)
    [f] = findings(c, "unordered-access")
    assert f.location.line == line_of(read) and f.because.location.line == line_of(wrote)
    assert f"stream {B:#x}" in f.message and f"stream {A:#x}" in f.message and f"{BASE:#x}" in f.message
    assert "cuLaunchKernel" in f.because.what and f.because.in_record


@pytest.mark.parametrize("between", ["event", "sync", "device-sync", "sync-on-another-thread"])
def test_what_orders_the_read_after_the_write_leaves_no_finding(between):
    c = two_streams()
    c.kernel(A, BASE)
    if between == "event":
        c.event(0xE1)
        c.record(0xE1, A)
        c.wait(B, 0xE1)
    elif between == "sync":
        c.sync(A)
    elif between == "device-sync":
        c.at("cuCtxSynchronize", dur=5)
    else:  # the host saw it finish on another thread, which then told this one (a queue, a lock)
        c.sync(A, tid=2)
    c.d2h(BASE, B)
    assert findings(c) == []


def test_a_synchronisation_still_running_orders_nothing_yet():
    c = two_streams()
    c.kernel(A, BASE)
    c.at("cuStreamSynchronize", stream=A, tid=2, dur=100)  # returns after the read below was enqueued
    c.d2h(BASE, B)
    assert [f.rule for f in findings(c)] == ["unordered-access"]


def test_an_event_recorded_before_the_write_does_not_order_it():
    c = two_streams()
    c.event(0xE1)
    c.record(0xE1, A)
    c.kernel(A, BASE)
    c.wait(B, 0xE1)
    c.d2h(BASE, B)
    assert [f.rule for f in findings(c)] == ["unordered-access"]


def test_work_on_one_stream_is_ordered_by_the_stream():
    c = two_streams()
    c.kernel(A, BASE)
    c.d2h(BASE, A)
    assert findings(c) == []


@pytest.mark.parametrize("flags, hazard", [(0, False), (NON_BLOCKING, True)])
def test_the_legacy_stream_orders_blocking_streams_only(flags, hazard):
    c = two_streams(flags)
    c.kernel(0, BASE)  # the legacy default stream writes
    c.d2h(BASE, B)  # a blocking stream waits for it; a non-blocking one does not
    assert bool(findings(c)) is hazard


def test_a_write_after_another_streams_read_is_unordered():
    c = two_streams()
    c.h2d(BASE, A)
    c.sync(A)
    read = c.kernel(A, BASE, OTHER)  # two blocks, neither fresh for BASE: it reads BASE
    write = c.h2d(BASE, B)  # the refill while the kernel may still read
    [f] = findings(c, "unordered-access")
    assert f.location.line == line_of(write) and f.because.location.line == line_of(read)
    assert "writes" in f.message and " used on " in f.message


def test_two_streams_reading_shared_memory_is_no_hazard():
    c = two_streams()
    c.h2d(BASE, A)
    c.sync(A)
    c.alloc(OTHER + (1 << 21))
    c.kernel(A, BASE, OTHER)  # both read the weights, each writes its own fresh output
    c.kernel(B, BASE, OTHER + (1 << 21))
    assert findings(c) == []


def test_a_stream_handle_made_again_is_a_new_timeline():
    c = two_streams()
    c.kernel(A, BASE)
    c.at("cuStreamDestroy_v2", stream=A)
    c.stream(A, NON_BLOCKING)  # the driver hands out the same handle: not ordered after the old stream's work
    c.d2h(BASE, A)
    assert [f.rule for f in findings(c)] == ["unordered-access"]


def test_per_thread_default_streams_are_one_per_thread():
    c = two_streams()
    c.at("cuLaunchKernel_ptsz", stream=0, function=0xF00, raw=launch_blob(BASE), tid=MAIN)
    c.at("cuMemcpyDtoHAsync_v2_ptsz", src=BASE, size=64, stream=0, tid=MAIN)
    assert findings(c) == []  # the same thread's stream
    c.at("cuMemcpyDtoHAsync_v2_ptsz", src=BASE, size=64, stream=0, tid=2)
    assert [f.rule for f in findings(c)] == ["unordered-access"]  # another thread's


# ---------------------------------------------------------------- freed-while-in-use


def test_a_stream_ordered_free_while_another_stream_uses_the_memory():
    c = two_streams()
    c.h2d(BASE, A)
    c.sync(A)
    use = c.kernel(B, BASE)
    free = c.at("cuMemFreeAsync", ptr=BASE, stream=A)
    [f] = findings(c, "freed-while-in-use")
    assert f.location.line == line_of(free) and f.because.location.line == line_of(use)


def test_a_free_after_the_use_was_waited_for_is_clean():
    c = two_streams()
    c.kernel(B, BASE)
    c.event(0xE1)
    c.record(0xE1, B)
    c.wait(A, 0xE1)
    c.at("cuMemFreeAsync", ptr=BASE, stream=A)
    assert findings(c) == []


def pool_case(record_stream: bool = False, alloc_stream: int = A, flags: int = NON_BLOCKING) -> tuple[Calls, dict,
                                                                                                        dict]:
    c = two_streams(flags)
    block = BASE + 4096
    c.hook("POOL_ALLOC", ptr=block, size=4096, stream=alloc_stream, call="torch caching allocator malloc")
    use = c.d2h(block, B)
    if record_stream:
        c.hook("RECORD_STREAM", ptr=block, stream=B)
    free = c.hook("POOL_FREE", ptr=block, call="torch caching allocator free")
    return c, use, free


def test_a_pool_block_handed_back_while_another_stream_copies_from_it():
    c, use, free = pool_case()
    [f] = findings(c, "freed-while-in-use")
    assert f.location.line == line_of(free) and f.because.location.line == line_of(use)
    assert "torch caching allocator free" in f.message and f"{BASE + 4096:#x}" in f.message


def test_record_stream_orders_the_other_streams_use_before_the_pools_reuse():
    c, _, _ = pool_case(record_stream=True)
    assert findings(c) == []


def test_a_legacy_stream_block_is_reused_after_the_blocking_streams_work():
    c, _, _ = pool_case(alloc_stream=0, flags=0)  # the next legacy-stream work waits for stream B
    assert findings(c) == []
    c, _, _ = pool_case(alloc_stream=0, flags=NON_BLOCKING)
    assert [f.rule for f in findings(c)] == ["freed-while-in-use"]


def test_a_legacy_stream_block_used_on_the_legacy_stream_is_reused_after_that_use():
    """CuPy's ``cupy.arange(n) * 0.5``: the temporary is handed back while the kernel reading it may still run,
    both on the legacy stream; the hook's note names no context, the kernel its thread's current one."""
    c = Calls()
    c.alloc()
    c.hook("POOL_ALLOC", ptr=BASE, size=4096, stream=0, call="CuPy's pool malloc")
    c.kernel(0, BASE)
    c.hook("POOL_FREE", ptr=BASE, call="CuPy's pool free")
    assert findings(c) == []


def test_a_pool_block_handed_out_on_a_thread_with_no_call_is_on_its_allocations_legacy_stream():
    """PyTorch's backward: the autograd thread's hooks note a block handed out and back before that thread made
    a CUDA call of its own, and its kernel on the legacy stream is that thread's first call. The block is on the
    legacy stream of the context its allocation belongs to: the kernel and the reuse are in stream order."""
    c = Calls()
    c.alloc()
    c.hook("POOL_ALLOC", tid=WORKER, ptr=BASE, size=4096, stream=0, call="torch caching allocator malloc")
    c.kernel(0, BASE, tid=WORKER)
    c.hook("POOL_FREE", tid=WORKER, ptr=BASE, call="torch caching allocator free")
    assert findings(c) == []
    other = Calls()  # on a non-blocking stream of its own: the free is not ordered after the legacy stream's use
    other.alloc()
    other.stream(A, flags=NON_BLOCKING)
    other.hook("POOL_ALLOC", tid=WORKER, ptr=BASE, size=4096, stream=A, call="torch caching allocator malloc")
    other.kernel(0, BASE, tid=WORKER)
    other.hook("POOL_FREE", tid=WORKER, ptr=BASE, call="torch caching allocator free")
    assert [f.rule for f in findings(other)] == ["freed-while-in-use"]


def test_a_named_stream_a_note_names_first_keeps_no_guessed_context():
    """The owner's context stands in for a default stream only: a stream handle a hook's note names first, on a
    thread with no successful call, is not taken to be in that context (its order against the legacy stream
    is not guessed)."""
    c = Calls()
    c.alloc()
    c.at("cuCtxGetDevice", tid=WORKER, status="CUDA_ERROR_INVALID_CONTEXT")
    c.hook("POOL_ALLOC", tid=WORKER, ptr=BASE, size=4096, stream=A)
    c.kernel(0, BASE)
    c.kernel(A, BASE)
    assert "unordered-access" in [f.rule for f in findings(c)]


def test_a_pool_block_is_its_own_memory_inside_the_allocation():
    c = two_streams()
    c.hook("POOL_ALLOC", ptr=BASE, size=4096, stream=A)
    c.hook("POOL_ALLOC", ptr=BASE + 4096, size=4096, stream=A)
    c.kernel(A, BASE)
    c.d2h(BASE + 4096, B)  # the neighbouring block: not the memory the kernel wrote
    assert findings(c) == []


def test_a_pool_block_of_unknown_size_ends_at_the_next_block():
    c = two_streams()
    c.hook("POOL_ALLOC", ptr=BASE, size=0, stream=A)  # PyTorch's trace gives only the pointer
    c.hook("POOL_ALLOC", ptr=BASE + 4096, size=0, stream=A)
    c.kernel(A, BASE + 64)
    c.d2h(BASE + 4096 + 64, B)
    assert findings(c) == []
    c.d2h(BASE + 128, B)
    assert [f.rule for f in findings(c)] == ["unordered-access"]


# ---------------------------------------------------------------- wait-orders-nothing


def test_a_wait_on_an_event_never_recorded():
    c = two_streams()
    made = c.event(0xE1)
    wait = c.wait(B, 0xE1)
    [f] = findings(c, "wait-orders-nothing")
    assert f.location.line == line_of(wait) and f.because.location.line == line_of(made)
    assert "never recorded" in f.message


def test_a_wait_on_a_recorded_event_or_one_made_before_tracing_is_clean():
    c = two_streams()
    c.event(0xE1)
    c.record(0xE1, A)
    c.wait(B, 0xE1)
    c.wait(B, 0xE2)  # not made while tracing: what it holds is not known
    assert findings(c) == []


def test_a_library_wait_the_driver_never_saw():
    c = two_streams()
    made = c.hook("LIBRARY_EVENT_CREATED", call="torch.cuda.Event()")
    wait = c.hook("LIBRARY_EVENT_WAIT", library="PyTorch", made=made, call="torch.cuda.Event.wait")
    [f] = findings(c, "wait-orders-nothing")
    assert f.location.line == line_of(wait) and f.because.location.line == line_of(made)
    assert "PyTorch makes no CUDA call" in f.message


# ---------------------------------------------------------------- graph-replays-freed


def captured_graph(free: bool) -> tuple[Calls, dict | None, dict]:
    c = two_streams()
    c.at("cuStreamBeginCapture_v2", stream=A, mode=0)
    c.kernel(A, BASE)
    c.at("cuStreamEndCapture", stream=A, graph=0x6A)
    c.at("cuGraphInstantiateWithFlags", graph=0x6A, exec=0x6E)
    freed = c.at("cuMemFree_v2", ptr=BASE) if free else None
    launch = c.at("cuGraphLaunch", exec=0x6E, stream=A)
    return c, freed, launch


def test_a_graph_replayed_after_its_captured_memory_was_freed():
    c, freed, launch = captured_graph(free=True)
    assert freed is not None
    [f] = findings(c, "graph-replays-freed")
    assert f.location.line == line_of(launch) and f.because.location.line == line_of(freed)


def test_a_graph_whose_memory_is_kept_alive_is_clean_and_its_capture_ran_nothing():
    c, _, _ = captured_graph(free=False)
    assert findings(c) == []
    model = ordering_of(c.events)
    assert model.streams[("stream", A, 1)].clock[("stream", A, 1)] == 1  # only the replay ran on the stream


# ---------------------------------------------------------------- ipc-interior-pointer


def test_an_ipc_handle_for_a_pointer_inside_an_allocation():
    c = two_streams()
    export = c.at("cuIpcGetMemHandle", ptr=BASE + 4096)
    [f] = findings(c, "ipc-interior-pointer")
    assert f.location.line == line_of(export) and f.because.location.line == 3  # the cuMemAlloc
    assert "4096 bytes into" in f.message


def test_an_ipc_handle_for_an_allocations_base_is_clean():
    c = two_streams()
    c.at("cuIpcGetMemHandle", ptr=BASE)
    c.at("cuIpcGetMemHandle", ptr=0x1234_0000_0000)  # memory allocated before tracing: not judged
    assert findings(c) == []


# ---------------------------------------------------------------- what the model takes


def test_base_names_tell_the_calls_apart():
    assert base_name("cudaFreeAsync") not in SYNC_FREES and base_name("cuMemFree_v2") in SYNC_FREES
    assert base_name("cuMemcpyHtoDAsync_v2_ptsz") in ASYNC_COPIES and base_name("cudaMemcpyAsync_ptsz") in ASYNC_COPIES


def test_a_runtime_call_and_the_driver_call_beneath_it_are_one_operation():
    c = two_streams()
    c.t += 10
    c.call("runtime", "cudaMemcpyAsync", c.t, end=c.t + 8, line=1, args={"ptr": BASE, "src": 0, "size": 8,
                                                                          "stream": A})
    c.call("driver", "cuMemcpyAsync", c.t + 2, end=c.t + 6, args={"ptr": BASE, "src": 0, "size": 8, "stream": A},
           **{"from": "callback"})
    model = ordering_of(c.events)
    assert model.counts["operations"] == 5 and model.counts["uses"] == 1  # 2 streams, 2 allocations, 1 copy


def test_a_failing_call_orders_and_touches_nothing():
    c = two_streams()
    c.kernel(A, BASE)
    c.at("cuStreamSynchronize", stream=A, status="CUDA_ERROR_INVALID_HANDLE")
    c.d2h(BASE, B)
    assert [f.rule for f in findings(c)] == ["unordered-access"]


def test_buffers_a_library_suballocates_in_one_driver_allocation_are_told_apart_by_address():
    c = two_streams()  # XLA, RMM or a workspace: one cuMemAlloc region, arrays in it, no pool hook to tell
    c.kernel(A, BASE + 4096)  # one array written on A
    c.d2h(BASE + 8192, B)  # another array of the same region read on B: not the same bytes
    assert findings(c) == []
    c.d2h(BASE + 4096, B)  # the array A wrote, read on B with nothing between
    assert [f.rule for f in findings(c)] == ["unordered-access"]


# ---------------------------------------------------------------- a library's host read (JAX)

RESULT = OTHER + 512  # an array XLA made in its arena (one driver allocation)


def jax_handover(read: str) -> tuple[Calls, dict, dict]:
    """A PyTorch pool block read by a JAX kernel on stream B that writes its result into XLA's arena; the host
    reads the result (``read``): XLA records an event after the kernel, makes stream C wait for it and copies the
    result to the host there (its wait is on a host function: no CUDA call); then PyTorch hands the block back
    on stream A. ``handover_torch_to_jax_dlpack.py`` ends so. ``read``: "copied" (as JAX does), "no note",
    "no copy" (the note with nothing copied), "another array" (the copy of another address), "copied before"
    (the copy queued before the read began)."""
    c = two_streams()
    c.stream(C, NON_BLOCKING)
    block = BASE + 4096
    c.hook("POOL_ALLOC", ptr=block, size=4096, stream=A, call="torch caching allocator malloc")
    use = c.kernel(B, block, RESULT)  # jnp.sum(arr): reads the tensor, writes its result
    c.event(0xE1)
    c.record(0xE1, B)
    c.wait(C, 0xE1)
    if read == "copied before":
        c.d2h(RESULT, C)
    began = c.t + 1
    if read in ("copied", "another array"):
        c.d2h(RESULT if read == "copied" else RESULT + 512, C)
    if read != "no note":
        c.hook("LIBRARY_READY", ptrs=[RESULT], began=began, library="JAX", call="jax.Array read on the host")
    free = c.hook("POOL_FREE", ptr=block, call="torch caching allocator free")
    return c, use, free


def test_a_jax_array_read_on_the_host_orders_what_its_copy_waited_for_before_a_later_free():
    c, _, _ = jax_handover("copied")
    assert findings(c) == []


@pytest.mark.parametrize("read", ["no note", "no copy", "another array", "copied before"])
def test_a_host_read_that_waited_for_no_copy_of_its_own_orders_nothing(read):
    c, use, free = jax_handover(read)
    [f] = findings(c, "freed-while-in-use")
    assert f.location.line == line_of(free) and f.because.location.line == line_of(use)


def test_a_host_read_does_not_order_another_streams_use_of_the_array():
    """XLA writes y on B; stream A copies y into other memory; the host reads y (its own copy on B); then B reads
    what A wrote with nothing ordering it: still unordered, the host read waited for y's copy, not A's."""
    c = two_streams()
    c.kernel(B, RESULT)  # y written on B
    c.event(0xE1)
    c.record(0xE1, B)
    c.wait(A, 0xE1)
    c.at("cuMemcpyDtoDAsync_v2", ptr=BASE, src=RESULT, size=64, stream=A)  # A copies y into BASE
    began = c.t + 1
    c.d2h(RESULT, B)  # the read's own copy
    c.hook("LIBRARY_READY", ptrs=[RESULT], began=began, library="JAX", call="jax.Array read on the host")
    read = c.d2h(BASE, B)  # B reads A's copy with nothing ordering it
    [f] = findings(c, "unordered-access")
    assert f.location.line == line_of(read)


def test_a_later_read_of_the_array_on_its_stream_is_not_taken_as_finished():
    """``z = y * arr``, then ``float(y)``, then arr's block freed: the host read waited for y, not for z's kernel."""
    c = two_streams()
    block = BASE + 4096
    c.hook("POOL_ALLOC", ptr=block, size=4096, stream=A, call="torch caching allocator malloc")
    c.kernel(B, RESULT)  # y written on B
    c.event(0xE1)
    c.record(0xE1, B)  # y's definition event, before z's kernel
    later = c.kernel(B, RESULT, block)  # z = y * arr, after it on B
    c.stream(C, NON_BLOCKING)
    c.wait(C, 0xE1)
    began = c.t + 1
    c.d2h(RESULT, C)
    c.hook("LIBRARY_READY", ptrs=[RESULT], began=began, library="JAX", call="jax.Array read on the host")
    c.hook("POOL_FREE", ptr=block, call="torch caching allocator free")
    [f] = findings(c, "freed-while-in-use")
    assert f.because.location.line == line_of(later)


@pytest.mark.parametrize("fields", [{"ptrs": 5}, {"ptrs": ["x"]}, {"ptrs": [RESULT], "began": "soon"}, {}])
def test_a_malformed_host_read_note_orders_nothing_and_raises_nothing(fields):
    c = two_streams()
    c.kernel(B, BASE)
    c.d2h(RESULT, B)
    c.hook("LIBRARY_READY", library="JAX", **fields)
    c.at("cuMemFreeAsync", ptr=BASE, stream=A)
    assert [f.rule for f in findings(c)] == ["freed-while-in-use"]
