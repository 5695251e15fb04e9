"""The rules written for the hazards users report (stray-context, context-leak, handle-from-another-context,
non-primary-current, used-after-teardown, unordered-handover, failed-call) on synthetic streams in the tracer's
format: each fires where its hazard is, and each condition of it has a case that keeps it quiet. The GPU test
(tests/gpu/test_realworld.py) runs them on the programs of examples/realworld/."""

import pytest

from ctxlab.audit import RULES_BY_ID, judge
from ctxlab.audit.child.exchange import describe, pending_work
from tests.audit_events import CREATED, MAIN, OTHER, PRIMARY, WORKER, Events

DEVICE = 0


def only(events, rule):
    return [f for f in judge(events) if f.rule == rule]


def rule(events, rule_id):
    return judge(events, rules=[RULES_BY_ID[rule_id]])


def primary_made(ev: Events, start: int = 10, tid: int = MAIN, line: int = 5) -> None:
    ev.runtime("cudaMemGetInfo", start, end=start + 50, tid=tid, context=PRIMARY, line=line)
    ev.driver("cuDevicePrimaryCtxRetain", start + 5, end=start + 40, tid=tid, context=PRIMARY,
              args={"ctx": PRIMARY, "device": DEVICE}, **{"from": "callback"})
    ev.resource("CONTEXT_CREATED", start + 20, tid=tid, context=PRIMARY, line=line)


# ---------------------------------------------------------------- stray-context

def test_stray_context_fires_at_the_line_that_made_a_primary_context_nothing_used():
    ev = Events()
    primary_made(ev, line=17)
    (f,) = rule(ev.events, "stray-context")
    assert f.severity == "warning" and str(f.location) == "app.py:17" and "GPU 0" in f.message


def test_stray_context_quiet_once_a_kernel_copy_or_allocation_ran_there():
    for name in ("cuLaunchKernel", "cudaMemcpyAsync", "cudaMalloc"):
        ev = Events()
        primary_made(ev)
        ev.call("runtime" if name.startswith("cuda") else "driver", name, 200, context=PRIMARY)
        assert not rule(ev.events, "stray-context"), name


def test_stray_context_quiet_for_a_created_or_destroyed_context():
    ev = Events()
    ev.driver("cuCtxCreate_v4", 10, end=30, context=CREATED, line=3, args={"ctx": CREATED, "device": 0})
    ev.resource("CONTEXT_CREATED", 20, context=CREATED, line=3)
    assert not rule(ev.events, "stray-context")  # context-leak's, not this rule's
    ev = Events()
    primary_made(ev)
    ev.resource("CONTEXT_DESTROY_STARTING", 300, context=PRIMARY, line=9)
    assert not rule(ev.events, "stray-context")


def test_stray_context_made_on_a_librarys_thread_names_the_python_thread_that_waited():
    ev = Events()
    ev.resource("CONTEXT_CREATED", 20, tid=999, context=PRIMARY, line=28)["asked_by"] = "MainThread"
    ev.driver("cuDevicePrimaryCtxRetain", 15, end=40, tid=999, context=PRIMARY, args={"ctx": PRIMARY, "device": 0})
    (f,) = rule(ev.events, "stray-context")
    assert f.thread == "MainThread" and f.location.line == 28 and "library's own" in f.message


# ---------------------------------------------------------------- context-leak

def created(ev: Events, start=10, tid=MAIN, line=3, ctx=CREATED):
    ev.driver("cuCtxCreate_v4", start, end=start + 20, tid=tid, context=ctx, line=line, args={"ctx": ctx, "device": 0})
    ev.resource("CONTEXT_CREATED", start + 10, tid=tid, context=ctx, line=line)


def test_a_created_context_never_destroyed_leaks_at_its_create():
    ev = Events()
    created(ev, line=12)
    (f,) = rule(ev.events, "context-leak")
    assert str(f.location) == "app.py:12" and "never destroyed" in f.message
    ev.driver("cuCtxDestroy_v2", 100, context=CREATED, line=20, args={"ctx": CREATED})
    assert not rule(ev.events, "context-leak")


def test_a_thread_that_ends_with_a_push_it_never_popped_leaks_at_the_last_push():
    ev = Events()
    created(ev)
    ev.driver("cuCtxPopCurrent_v2", 40, context=0, args={"ctx": CREATED})
    ev.driver("cuCtxPushCurrent_v2", 50, tid=WORKER, context=CREATED, line=30, args={"ctx": CREATED})
    ev.driver("cuCtxPushCurrent_v2", 60, tid=WORKER, context=CREATED, line=31, args={"ctx": CREATED})
    ev.driver("cuCtxPopCurrent_v2", 70, tid=WORKER, context=CREATED, args={"ctx": CREATED})
    ev.driver("cuCtxDestroy_v2", 200, context=0, line=40, args={"ctx": CREATED})
    assert not rule(ev.events, "context-leak")  # the worker has not ended
    ev.observed("THREAD_ENDED", 80, tid=WORKER)
    (f,) = rule(ev.events, "context-leak")
    assert f.thread == "worker" and f.location.line == 31 and "ended with context" in f.message


def test_a_balanced_thread_that_ended_is_quiet():
    ev = Events()
    created(ev)
    ev.driver("cuCtxPopCurrent_v2", 40, context=0, args={"ctx": CREATED})
    ev.driver("cuCtxPushCurrent_v2", 50, tid=WORKER, context=CREATED, line=30, args={"ctx": CREATED})
    ev.driver("cuCtxPopCurrent_v2", 70, tid=WORKER, context=0, args={"ctx": CREATED})
    ev.observed("THREAD_ENDED", 80, tid=WORKER)
    ev.driver("cuCtxDestroy_v2", 200, context=0, line=40, args={"ctx": CREATED})
    assert not rule(ev.events, "context-leak")


def test_a_set_between_a_push_and_its_pop_makes_the_pop_take_another_context():
    ev = Events()
    created(ev)
    ev.driver("cuCtxPushCurrent_v2", 50, tid=WORKER, context=CREATED, line=30, args={"ctx": CREATED})
    ev.driver("cuCtxSetCurrent", 60, tid=WORKER, context=PRIMARY, line=31, args={"ctx": PRIMARY})
    ev.driver("cuCtxPopCurrent_v2", 70, tid=WORKER, context=0, line=32, args={"ctx": PRIMARY})
    ev.driver("cuCtxDestroy_v2", 200, context=0, line=40, args={"ctx": CREATED})
    (f,) = rule(ev.events, "context-leak")
    assert f.location.line == 32 and "replaced it" in f.message
    ev.events[-2]["library"] = "numba_cuda"  # a library's own pop after its own set: not the program's pairing
    assert not rule(ev.events, "context-leak")


# ---------------------------------------------------------------- handle-from-another-context

def handles(ev: Events):
    created(ev)
    created(ev, start=40, ctx=OTHER, line=4)
    ev.driver("cuStreamCreate", 70, context=CREATED, line=6, args={"stream": 0x5000})
    ev.driver("cuEventCreate", 80, context=OTHER, line=7, args={"event": 0xE000})


def test_an_event_recorded_on_a_stream_of_another_context():
    ev = Events()
    handles(ev)
    ev.driver("cuEventRecord", 100, context=OTHER, status="CUDA_ERROR_INVALID_HANDLE", line=9,
              args={"event": 0xE000, "stream": 0x5000})
    (f,) = rule(ev.events, "handle-from-another-context")
    assert f.severity == "error" and f.location.line == 9 and "CUDA_ERROR_INVALID_HANDLE" in f.message


def test_an_event_on_a_stream_of_its_own_context_is_quiet():
    ev = Events()
    handles(ev)
    ev.driver("cuStreamCreate", 90, context=OTHER, line=8, args={"stream": 0x6000})
    ev.driver("cuEventRecord", 100, context=OTHER, line=9, args={"event": 0xE000, "stream": 0x6000})
    assert not rule(ev.events, "handle-from-another-context")


def test_a_launch_on_a_stream_of_a_context_that_is_not_current():
    ev = Events()
    handles(ev)
    ev.driver("cuLaunchKernel", 100, context=OTHER, line=9, args={"function": 1, "stream": 0x5000})
    (f,) = rule(ev.events, "handle-from-another-context")
    assert "is used with the context that made it current" in f.message
    ev.events[-1]["context"] = CREATED
    assert not rule(ev.events, "handle-from-another-context")


def test_a_handle_made_before_tracing_began_is_not_judged():
    ev = Events()
    created(ev)
    ev.driver("cuLaunchKernel", 100, context=CREATED, line=9, args={"function": 1, "stream": 0x7777})
    assert not rule(ev.events, "handle-from-another-context")


def test_elapsed_time_between_events_of_two_contexts():
    ev = Events()
    handles(ev)
    ev.driver("cuEventCreate", 85, context=CREATED, line=8, args={"event": 0xE100})
    ev.driver("cuEventElapsedTime_v2", 100, context=CREATED, line=9, status="CUDA_ERROR_INVALID_HANDLE",
              args={"event": 0xE100, "end_event": 0xE000})
    (f,) = rule(ev.events, "handle-from-another-context")
    assert "cannot be measured" in f.message


# ---------------------------------------------------------------- non-primary-current

def test_runtime_work_under_a_created_context_is_reported_once_per_thread():
    ev = Events()
    created(ev)
    ev.runtime("cudaMalloc", 100, context=CREATED, line=9)
    ev.runtime("cudaLaunchKernel", 110, context=CREATED, line=10)
    (f,) = rule(ev.events, "non-primary-current")
    assert f.location.line == 9 and "runtime call" in f.message


def test_runtime_queries_and_the_primary_context_are_quiet():
    ev = Events()
    created(ev)
    ev.runtime("cudaGetDevice", 100, context=CREATED, line=9)
    ev.runtime("cudaMalloc", 120, context=PRIMARY, line=10)
    assert not rule(ev.events, "non-primary-current")


def test_a_library_that_retains_the_primary_context_under_a_created_one():
    ev = Events()
    created(ev)
    ev.driver("cuDevicePrimaryCtxRetain", 100, context=CREATED, line=9, args={"ctx": PRIMARY, "device": 0},
              library="numba_cuda")
    (f,) = rule(ev.events, "non-primary-current")
    assert "Numba" in f.message
    del ev.events[-1]["library"]  # the program's own retain: its business
    assert not rule(ev.events, "non-primary-current")


# ---------------------------------------------------------------- used-after-teardown

def test_memory_freed_after_its_context_was_destroyed():
    ev = Events()
    created(ev)
    ev.driver("cuMemAlloc_v2", 40, context=CREATED, line=6, args={"ptr": 0x7F0000000000, "size": 4096})
    ev.driver("cuCtxDestroy_v2", 60, context=CREATED, line=7, args={"ctx": CREATED})
    ev.resource("CONTEXT_DESTROY_STARTING", 61, context=CREATED, line=7)
    ev.driver("cuMemFree_v2", 80, context=0, status="CUDA_ERROR_INVALID_CONTEXT", line=12,
              args={"ptr": 0x7F0000000000})
    (f,) = rule(ev.events, "used-after-teardown")
    assert f.location.line == 12 and [(w, loc.line) for w, loc in f.related] == [("destroyed at", 7)]


@pytest.mark.parametrize("status", ["CUDA_ERROR_INVALID_CONTEXT", "CUDA_SUCCESS"])
def test_memory_used_after_its_context_was_destroyed_whatever_the_call_returned(status):
    """A free of the destroyed context's memory, failing or (where the driver reports one) successful:
    a use of memory the destroy took, found in the one allocation map (the state model's blocks)."""
    ev = Events()
    created(ev)
    ev.driver("cuMemAlloc_v2", 40, context=CREATED, line=6, args={"ptr": 0x7F0000000000, "size": 4096})
    ev.driver("cuCtxDestroy_v2", 60, context=CREATED, line=7, args={"ctx": CREATED})
    ev.resource("CONTEXT_DESTROY_STARTING", 61, context=CREATED, line=7)
    ev.driver("cuMemFree_v2", 80, context=PRIMARY, status=status, line=12, args={"ptr": 0x7F0000000000})
    (f,) = rule(ev.events, "used-after-teardown")
    assert f.location.line == 12 and "memory at 0x7f0000000000" in f.message


def test_a_free_before_the_destroy_or_with_the_context_still_current_is_not_this_rules():
    ev = Events()
    created(ev)
    ev.driver("cuMemAlloc_v2", 40, context=CREATED, line=6, args={"ptr": 0x7F0000000000, "size": 4096})
    ev.driver("cuMemFree_v2", 50, context=CREATED, line=12, args={"ptr": 0x7F0000000000})
    ev.driver("cuCtxDestroy_v2", 60, context=CREATED, line=7, args={"ctx": CREATED})
    assert not rule(ev.events, "used-after-teardown")


# ---------------------------------------------------------------- unordered-handover

def test_a_handover_while_another_streams_work_is_pending():
    ev = Events()
    ev.driver("cuLaunchKernel", 100, context=PRIMARY, args={"function": 1, "stream": 0xA0})
    ev.observed("HANDOVER", 200, line=36, consumer="cupy.asarray", protocol="__cuda_array_interface__",
                why="v2 names no stream")
    (f,) = rule(ev.events, "unordered-handover")
    assert f.location.line == 36 and "1 on stream 0xa0" in f.message


def test_synchronising_the_stream_or_waiting_for_its_event_orders_it():
    for sync in ({"name": "cuStreamSynchronize", "args": {"stream": 0xA0}}, {"name": "cuCtxSynchronize", "args": {}}):
        ev = Events()
        ev.driver("cuLaunchKernel", 100, context=PRIMARY, args={"function": 1, "stream": 0xA0})
        ev.driver(sync["name"], 150, context=PRIMARY, args=sync["args"])
        ev.observed("HANDOVER", 200, line=36)
        assert not rule(ev.events, "unordered-handover"), sync
    ev = Events()
    ev.driver("cuLaunchKernel", 100, context=PRIMARY, args={"function": 1, "stream": 0xA0})
    ev.driver("cuEventRecord", 120, context=PRIMARY, args={"event": 0xE0, "stream": 0xA0})
    ev.driver("cuStreamWaitEvent", 130, context=PRIMARY, args={"event": 0xE0, "stream": 0})
    ev.observed("HANDOVER", 200, line=36)
    assert not rule(ev.events, "unordered-handover")
    assert pending_work(ev.events, 140) == {} and pending_work(ev.events, 125) == {0xA0: 1}


def test_work_on_the_default_streams_is_not_pending():
    ev = Events()
    for stream in (0, 1, 2):
        ev.driver("cuLaunchKernel", 100 + stream, context=PRIMARY, args={"function": 1, "stream": stream})
    ev.observed("HANDOVER", 200, line=36)
    assert not rule(ev.events, "unordered-handover")


def test_what_a_handover_passes_is_described():
    class V2:
        __cuda_array_interface__ = {"version": 2, "shape": (1,)}

    class V3:
        __cuda_array_interface__ = {"version": 3, "shape": (1,), "stream": 1}

    class Protocol:
        def __dlpack__(self, stream=None):
            return None

    assert "names no stream" in describe(V2())["why"]
    assert "stream 1" in describe(V3())["why"]
    assert describe(Protocol())["protocol"].startswith("DLPack")
    assert describe([1, 2]) is None and describe(object()) is None


# ---------------------------------------------------------------- failed-call

def test_a_failing_call_no_rule_explains_is_a_finding_with_the_state_it_met():
    ev = Events()
    ev.driver("cuCtxSetCurrent", 40, tid=WORKER, context=CREATED, line=4, args={"ctx": CREATED})
    ev.driver("cuStreamGetPriority", 60, tid=WORKER, context=CREATED, status="CUDA_ERROR_INVALID_HANDLE", line=6,
              args={"stream": 0x99})
    (f,) = [f for f in judge(ev.events) if f.rule == "failed-call"]
    assert f.severity == "error" and f.location.line == 6 and f.thread == "worker"
    assert "returned CUDA_ERROR_INVALID_HANDLE, made by the program itself" in f.message
    assert "a context made before tracing began (0x7f00aa00)" in f.message
    assert "its stream 0x99 was not made while tracing" in f.message


def test_every_failing_call_is_a_finding_whatever_its_status():
    for status in ("CUDA_ERROR_INVALID_VALUE", "CUDA_ERROR_NOT_SUPPORTED", "CUDA_ERROR_UNKNOWN"):
        ev = Events()
        ev.driver("cuMemsetD32_v2", 60, tid=WORKER, context=CREATED, status=status, line=6)
        (f,) = judge(ev.events)
        assert f.rule == "failed-call" and status in f.message
    ev = Events()
    ev.driver("cuStreamQuery", 60, tid=WORKER, context=CREATED, status="CUDA_ERROR_NOT_READY", line=6)
    assert not judge(ev.events)  # NOT_READY answers a query: not a failure


def test_a_loop_of_one_failing_call_is_one_finding_that_counts_them():
    ev = Events()
    for t in range(5):
        ev.driver("cuMemsetD32_v2", 60 + 10 * t, tid=WORKER, context=CREATED, status="CUDA_ERROR_INVALID_VALUE", line=6)
    (f,) = judge(ev.events)
    assert "(5 times)" in f.message


def test_probes_are_told_apart_by_evidence_not_by_a_list_of_codes(monkeypatch):
    from ctxlab.audit.engine import Stream
    from ctxlab.audit.rules import probes as catalogue
    from ctxlab.audit.rules.failures import probes
    from ctxlab.audit.run import judge_stream

    # beneath a runtime call that succeeded: the runtime asked, and went on
    ev = Events()
    ev.runtime("cudaSetDevice", 50, end=80, tid=WORKER, context=PRIMARY)
    ev.driver("cuCtxGetDevice", 60, tid=WORKER, status="CUDA_ERROR_INVALID_CONTEXT", line=6, **{"from": "callback"})
    stream = Stream(ev.events)
    assert not [f for f in judge_stream(stream) if f.rule == "failed-call"]
    (probe,) = probes(stream)
    assert probe["library"] == "the CUDA runtime" and "beneath cudaSetDevice" in probe["why"]
    # the same call beneath a runtime call that failed: the failure reached the program
    ev.events[0]["status"] = "cudaErrorInvalidDevice"
    assert [f.rule for f in judge(ev.events) if f.rule == "failed-call"]
    # the same call made by the program: a finding (no blanket list of probing functions hides it)
    ev = Events()
    ev.driver("cuCtxGetDevice", 60, tid=WORKER, status="CUDA_ERROR_INVALID_CONTEXT", line=6)
    assert [f.rule for f in judge(ev.events)] == ["failed-call"]
    # made by a library whose (library, call, status) the catalogue backs with a clean program
    ev.events[0]["callers"] = ["cupy_backends/cuda/api/driver.cpython-312-x86_64-linux-gnu.so"]
    assert [f.rule for f in judge(ev.events)] == ["failed-call"]
    entry = catalogue.Probe("cupy", "cuCtxGetDevice", "CUDA_ERROR_INVALID_CONTEXT", "examples/x.py", "asks")
    monkeypatch.setattr(catalogue, "PROBES", (entry,))
    monkeypatch.setattr(catalogue.probe_of, "__defaults__", ((entry,),))
    assert not judge(ev.events)
    ev.events[0]["status"] = "CUDA_ERROR_INVALID_VALUE"  # another status of the same call is not catalogued
    assert [f.rule for f in judge(ev.events)] == ["failed-call"]


def test_a_failure_a_rule_explains_is_not_reported_again():
    ev = Events()
    ev.driver("cuMemAlloc_v2", 60, tid=WORKER, status="CUDA_ERROR_INVALID_CONTEXT", line=6)
    rules = [f.rule for f in judge(ev.events)]
    assert rules == ["no-context"]  # explained by no-context: not again as failed-call


def test_the_exchange_hook_wraps_a_consumer_imported_after_it_and_puts_it_back(tmp_path, monkeypatch):
    import importlib
    import sys

    from ctxlab.audit.child import exchange

    (tmp_path / "fakelib_ctx.py").write_text("def take(obj=None, *args, **kwargs):\n    return ('took', obj)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(exchange.CONSUMERS, "fakelib_ctx", ("take",))
    notes: list[dict] = []
    hook = exchange.ExchangeHook(notes.append, lambda: 42)
    hook.install()
    try:
        module = importlib.import_module("fakelib_ctx")

        class V2:
            __cuda_array_interface__ = {"version": 2}

        arr = V2()
        assert module.take(arr) == ("took", arr) and module.take([1]) == ("took", [1])
    finally:
        hook.close()
        sys.modules.pop("fakelib_ctx", None)
    (note,) = notes
    assert note["consumer"] == "fakelib_ctx.take" and note["start"] == 42 and note["stack"]
    assert not getattr(module.take, "__ctxlab_exchange__", False)  # the original is back


def test_what_the_protocol_orders_inside_the_consumers_call_counts():
    ev = Events()
    ev.driver("cuLaunchKernel", 100, context=PRIMARY, args={"function": 1, "stream": 0xA0})
    note = ev.observed("HANDOVER", 200, line=36, consumer="torch.from_dlpack", protocol="DLPack (__dlpack__)")
    ev.driver("cuStreamSynchronize", 210, context=PRIMARY, args={"stream": 0xA0})  # the producer waits, inside
    assert rule(ev.events, "unordered-handover")  # a note without its end: the call's inside is not known
    note["end"] = 250
    assert not rule(ev.events, "unordered-handover")
    ev.driver("cuLaunchKernel", 220, context=PRIMARY, args={"function": 2, "stream": 0xB0})  # the consumer's own
    assert not rule(ev.events, "unordered-handover")
