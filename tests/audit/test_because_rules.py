"""Every finding has a because from the program's history (issue 47 item 1): for each kind of explanation, the
finding's because names the causing call, its thread and the user's line (CPU only, synthetic streams)."""

from ctxlab.audit import judge
from ctxlab.audit.engine import NO_CAUSE
from tests.audit_events import CREATED, MAIN, OTHER, PRIMARY, WORKER, Events

ILLEGAL = "CUDA_ERROR_ILLEGAL_ADDRESS"
INVALID_VALUE = "CUDA_ERROR_INVALID_VALUE"
INVALID_HANDLE = "CUDA_ERROR_INVALID_HANDLE"
PTR, STREAM, FN, MOD = 0x7F0000200000, 0x5A5A00, 0xF00D00, 0x0D0D00


def one(findings, rule):
    (found,) = [f for f in findings if f.rule == rule]
    return found


def assert_because(f, call: str, thread: str, line: int):
    assert f.because.in_record, f.because
    assert f.because.call.startswith(call), f.because.call
    assert f.because.thread == thread and f.because.location is not None, f.because
    assert f.because.location.line == line, (f.because, f.because.location)
    assert str(f.because).startswith("because: ")


def test_the_destroy_on_another_thread_is_the_because_of_destroyed_while_current():
    ev = Events()
    ev.driver("cuCtxCreate_v4", 10, end=30, context=CREATED, line=20, args={"ctx": CREATED})
    ev.resource("CONTEXT_CREATED", 20, context=CREATED, line=20)
    ev.driver("cuCtxPushCurrent_v2", 40, tid=WORKER, context=CREATED, line=26, args={"ctx": CREATED})
    ev.driver("cuCtxDestroy_v2", 50, end=70, context=0, line=33, args={"ctx": CREATED})
    ev.resource("CONTEXT_DESTROY_STARTING", 60, context=CREATED, line=33)
    ev.driver("cuCtxSynchronize", 80, tid=WORKER, context=CREATED, status="CUDA_ERROR_CONTEXT_IS_DESTROYED", line=29)
    f = one(judge(ev.events), "destroyed-while-current")
    assert_because(f, "cuCtxDestroy_v2", "MainThread", 33)
    assert "destroyed context" in f.because.what


def test_the_free_is_the_because_of_memory_used_after_it_was_freed():
    ev = Events()
    ev.primary_runtime()
    ev.driver("cuMemAlloc_v2", 100, context=PRIMARY, line=5, args={"ptr": PTR, "size": 4096})
    ev.driver("cuMemFree_v2", 200, tid=WORKER, context=PRIMARY, line=20, args={"ptr": PTR})
    ev.driver("cuMemsetD32_v2", 300, context=PRIMARY, line=30, args={"ptr": PTR + 64}, status=INVALID_VALUE)
    f = one(judge(ev.events), "freed-memory-used")
    assert_because(f, "cuMemFree_v2", "worker", 20)
    assert "points into" in f.because.what


def test_the_destroy_of_the_stream_is_the_because_of_a_stream_used_after_it():
    ev = Events()
    ev.primary_runtime()
    ev.driver("cuStreamCreate", 100, context=PRIMARY, line=8, args={"stream": STREAM})
    ev.driver("cuStreamDestroy_v2", 200, tid=WORKER, context=PRIMARY, line=18, args={"stream": STREAM})
    ev.driver("cuStreamSynchronize", 300, context=PRIMARY, line=28, args={"stream": STREAM}, status=INVALID_HANDLE)
    f = one(judge(ev.events), "handle-destroyed")
    assert_because(f, "cuStreamDestroy_v2", "worker", 18)


def test_the_launch_before_a_sticky_error_is_its_because():
    ev = Events()
    ev.primary_runtime()
    ev.driver("cuLaunchKernel", 100, context=PRIMARY, line=12, args={"function": FN, "stream": 0})
    ev.driver("cuCtxSynchronize", 200, context=PRIMARY, line=14, status=ILLEGAL)
    f = one(judge(ev.events), "sticky-error")
    assert_because(f, "cuLaunchKernel", "MainThread", 12)
    assert "the only launch" in f.because.what


def test_the_set_that_replaced_a_push_is_the_because_of_the_wrong_pop():
    ev = Events()
    ev.driver("cuCtxCreate_v4", 10, end=20, tid=WORKER, context=CREATED, line=3, args={"ctx": CREATED})
    ev.driver("cuCtxPopCurrent_v2", 25, tid=WORKER, context=0, line=4, args={"ctx": CREATED})
    ev.driver("cuCtxPushCurrent_v2", 30, tid=WORKER, context=CREATED, line=5, args={"ctx": CREATED})
    ev.driver("cuCtxSetCurrent", 40, tid=WORKER, context=PRIMARY, line=7, args={"ctx": PRIMARY})
    ev.driver("cuCtxPopCurrent_v2", 50, tid=WORKER, context=0, line=9, args={"ctx": PRIMARY})
    f = next(f for f in judge(ev.events) if f.rule == "context-leak" and "popped" in f.message)
    assert_because(f, "cuCtxSetCurrent", "worker", 7)


def test_a_thread_without_a_context_is_explained_by_the_other_threads_create():
    ev = Events()
    ev.driver("cuCtxCreate_v4", 10, end=30, context=CREATED, line=20, args={"ctx": CREATED})
    ev.driver("cuMemAlloc_v2", 100, tid=WORKER, status="CUDA_ERROR_INVALID_CONTEXT", line=21)
    f = one(judge(ev.events), "no-context")
    assert_because(f, "cuCtxCreate_v4", "MainThread", 20)
    assert "current per thread" in f.because.what


def test_a_created_context_under_a_runtime_call_is_explained_by_the_push_that_made_it_current():
    ev = Events()
    ev.driver("cuCtxCreate_v4", 10, end=30, context=CREATED, line=3, args={"ctx": CREATED})
    ev.resource("CONTEXT_CREATED", 20, context=CREATED, line=3)
    ev.driver("cuCtxPopCurrent_v2", 40, context=0, line=4, args={"ctx": CREATED})
    ev.driver("cuCtxPushCurrent_v2", 50, context=CREATED, line=9, args={"ctx": CREATED})
    ev.runtime("cudaMalloc", 60, context=CREATED, line=11)
    f = one(judge(ev.events), "non-primary-current")
    assert_because(f, "cuCtxPushCurrent_v2", "MainThread", 9)


def test_the_capture_begin_is_the_because_of_a_capture_violation():
    ev = Events()
    ev.primary_runtime()
    ev.driver("cuStreamBeginCapture_v2", 100, context=PRIMARY, line=10, args={"stream": STREAM, "mode": 0})
    ev.driver("cuMemAlloc_v2", 150, tid=WORKER, context=PRIMARY, line=30,
              status="CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
    ev.driver("cuStreamEndCapture", 200, context=PRIMARY, line=12, args={"stream": STREAM},
              status="CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")
    f = one(judge(ev.events), "capture-violation")
    assert_because(f, "cuStreamBeginCapture_v2", "MainThread", 10)


def test_a_stream_of_another_context_is_explained_by_the_push_after_it_was_made():
    ev = Events()
    ev.driver("cuCtxCreate_v4", 10, end=20, context=CREATED, line=3, args={"ctx": CREATED})
    ev.driver("cuStreamCreate", 30, context=CREATED, line=4, args={"stream": STREAM})
    ev.driver("cuCtxPushCurrent_v2", 40, context=OTHER, line=6, args={"ctx": OTHER})
    ev.driver("cuLaunchKernel", 50, context=OTHER, line=8, args={"function": FN, "stream": STREAM},
              status=INVALID_HANDLE)
    f = one(judge(ev.events), "handle-from-another-context")
    assert_because(f, "cuCtxPushCurrent_v2", "MainThread", 6)
    assert "pushed context" in f.because.what


def test_a_failed_call_nothing_explains_says_the_cause_is_not_in_the_record():
    ev = Events()
    ev.primary_runtime()
    ev.driver("cuMemAlloc_v2", 100, context=PRIMARY, line=5, status="CUDA_ERROR_UNKNOWN")
    f = one(judge(ev.events), "failed-call")
    assert not f.because.in_record and f.because.what.startswith(NO_CAUSE)
    assert f.as_dict()["because"]["in_record"] is False


def test_a_failed_call_on_freed_memory_in_another_thread_names_the_free():
    ev = Events()
    ev.primary_runtime()
    ev.driver("cuMemAlloc_v2", 100, context=PRIMARY, line=5, args={"ptr": PTR, "size": 4096})
    ev.driver("cuStreamCreate", 110, context=PRIMARY, line=6, args={"stream": STREAM})
    ev.driver("cuStreamDestroy_v2", 150, tid=WORKER, context=PRIMARY, line=16, args={"stream": STREAM})
    ev.driver("cuEventRecord", 300, context=PRIMARY, line=30, args={"event": 0xE0, "stream": STREAM},
              status=INVALID_HANDLE)
    f = one(judge(ev.events), "handle-destroyed")
    assert_because(f, "cuStreamDestroy_v2", "worker", 16)
    assert MAIN != WORKER
