"""The judge's indices (issue 48: judging cheaper than a scan per rule) answer what the scans they replace
answered: ``Stream.named`` is the calls a prefix test keeps, in time order; ``Stream.unsuccessful`` the calls
that did not return success; ``Model.failed_calls`` the failing calls in time order; ``has_frames`` is
``bool(frames(...))``; and the rules find the same with a program's unrelated calls around its hazards."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlab.audit.engine import OK_STATUSES, Stream, failed, frames, has_frames
from ctxlab.audit.model.one_pass import model
from ctxlab.audit.rules.catalogue import judge
from tests.audit_events import CREATED, MAIN, PRIMARY, WORKER, Events

NAMES = ("cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2", "cuCtxSetCurrent", "cuCtxCreate_v4", "cuCtxDestroy_v2",
         "cuLaunchKernel", "cuLaunchKernel_ptsz", "cuMemFree_v2", "cuMemAlloc_v2", "cuStreamSynchronize",
         "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2", "cudaDeviceReset", "cuCtxGetCurrent")
STATUSES = ("CUDA_SUCCESS", None, "CUDA_ERROR_INVALID_CONTEXT", "CUDA_ERROR_NOT_READY", "cudaSuccess",
            "CUDA_ERROR_INVALID_HANDLE")
PREFIXES = ("cuCtx", "cuCtxPush", "cuLaunch", "cuMem", "cuDevicePrimaryCtx", "cuda", "cuStream", "nothing")

calls = st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(STATUSES), st.integers(0, 40),
                           st.sampled_from(("driver", "runtime", "resource"))), max_size=40)


def _stream(items) -> Stream:
    events = Events()
    for name, status, start, domain in items:
        if domain == "resource":
            events.resource("CONTEXT_CREATED", start, context=PRIMARY)
            continue
        e = events.call(domain, name, start, end=start + 3, context=PRIMARY)
        e["status"] = status
    return Stream(events.events)


@settings(max_examples=150, deadline=None)
@given(calls, st.lists(st.sampled_from(PREFIXES), min_size=1, max_size=3).map(tuple))
def test_named_is_the_prefix_scan_in_time_order(items, prefixes):
    s = _stream(items)
    assert s.named(prefixes) == [e for e in s.calls if e["name"].startswith(prefixes)]
    assert s.named(prefixes) is s.named(prefixes)  # kept: asked again, not rebuilt


@settings(max_examples=150, deadline=None)
@given(calls)
def test_unsuccessful_and_failed_calls_are_the_scans_they_replace(items):
    s = _stream(items)
    assert s.unsuccessful == [e for e in s.calls if e.get("status") not in OK_STATUSES]
    assert model(s).failed_calls() == [e for e in s.calls if failed(e)]


frame = st.one_of(st.lists(st.one_of(st.integers(), st.text(max_size=3), st.none()), max_size=4),
                  st.tuples(st.text(max_size=3), st.one_of(st.integers(), st.text(max_size=3))), st.none(),
                  st.integers(), st.text(max_size=3))


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.none(), st.lists(frame, max_size=4)))
def test_has_frames_is_whether_frames_keeps_one(stack):
    assert has_frames(stack) == bool(frames(stack))


def _hazards() -> list[dict]:
    """A created context pushed and never popped on a worker that ended; a driver call with no context."""
    e = Events()
    e.driver("cuCtxCreate_v4", 100, tid=WORKER, context=CREATED, line=20, args={"ctx": CREATED, "device": 0})
    e.resource("CONTEXT_CREATED", 101, tid=WORKER, context=CREATED)
    e.driver("cuCtxPushCurrent_v2", 200, tid=WORKER, context=CREATED, line=21, args={"ctx": CREATED})
    e.observed("THREAD_ENDED", 300, tid=WORKER)
    e.driver("cuMemAlloc_v2", 400, tid=MAIN, status="CUDA_ERROR_INVALID_CONTEXT", line=30, args={"size": 64})
    return e.events


def _with_noise(events: list[dict]) -> list[dict]:
    """The same program with successful queries between every two of its calls (CuPy's launch path makes six
    such calls per launch)."""
    noise = Events()
    for t in range(0, 500, 7):
        for tid in (MAIN, WORKER):
            noise.driver("cuCtxGetCurrent", t, end=t + 1, tid=tid, line=90)
            noise.driver("cuFuncGetAttribute", t + 2, end=t + 3, tid=tid, line=91)
    return events + noise.events


def _summary(findings) -> list[tuple]:
    return [(f.rule, f.severity, f.thread, str(f.location)) for f in findings]


def test_unrelated_calls_change_no_finding():
    plain = _summary(judge(_hazards()))
    assert {rule for rule, *_ in plain} >= {"context-leak", "no-context"}  # the hazards are found at all
    assert _summary(judge(_with_noise(_hazards()))) == plain
