"""Every audit rule's predicate on synthetic event streams in the tracer's format: it fires where the
hazard is, at the user's file:line, and stays quiet on the look-alikes (CPU only)."""

import json

import pytest

from ctxlab.audit import RULES, RULES_BY_ID, judge
from ctxlab.audit.engine import Stream
from ctxlab.claim import catalogue
from tests.audit_events import CREATED, MAIN, OTHER, PRIMARY, WORKER, Events
from tests.conftest import RESULTS


def only(findings, rule):
    found = [f for f in findings if f.rule == rule]
    others = [f for f in findings if f.rule != rule and f.severity == "error"]
    assert not others, [(f.rule, f.message) for f in others]
    return found


def test_rules_are_declared_with_a_claim_the_labs_judge():
    import ctxlab.api

    ids = {entry["id"] for entry in catalogue(ctxlab.api.claims(None))}
    assert [r.id for r in RULES] == ["no-context", "destroyed-while-current", "primary-released-under-runtime",
                                      "reset-with-live-allocations", "cross-context-handle", "fork-after-init",
                                      "several-runtime-copies", "pointer-from-another-context",
                                      "green-context-on-two-threads", "stray-context", "context-leak",
                                      "handle-from-another-context", "non-primary-current", "used-after-teardown",
                                      "unordered-handover", "sticky-error", "capture-violation", "freed-memory-used",
                                      "handle-destroyed", "out-of-memory", "launch-config",
                                      "setting-changed-under", "freed-while-in-use", "unordered-access",
                                      "wait-orders-nothing", "graph-replays-freed", "ipc-interior-pointer",
                                      "library-not-watched", "recording-full", "program-crashed", "program-hung",
                                      "failed-call"]
    unclaimed = {"sticky-error", "capture-violation", "freed-memory-used", "handle-destroyed", "out-of-memory",
                 "launch-config", "setting-changed-under", "freed-while-in-use", "unordered-access",
                 "wait-orders-nothing", "graph-replays-freed", "ipc-interior-pointer", "library-not-watched",
                 "recording-full", "program-crashed", "program-hung", "failed-call"}
    for rule in RULES:
        assert rule.claim in ids if rule.id not in unclaimed else rule.claim == "", rule.id
        assert rule.severity in ("error", "warning", "info") and rule.explanation and rule.cannot_see
    assert next(r for r in RULES if r.id == "several-runtime-copies").severity == "info"
    assert next(r for r in RULES if r.id == "pointer-from-another-context").severity == "warning"
    assert next(r for r in RULES if r.id == "library-not-watched").severity == "info"


# ---------------------------------------------------------------- no-context

def no_context_stream(**kw) -> Events:
    ev = Events()
    ev.primary_runtime()
    ev.driver("cuMemAlloc_v2", 100, tid=WORKER, status="CUDA_ERROR_INVALID_CONTEXT", line=21, **kw)
    return ev


def test_no_context_fires_on_a_thread_that_never_had_one():
    (f,) = only(judge(no_context_stream().events), "no-context")
    assert f.severity == "error" and f.thread == "worker" and str(f.location) == "app.py:21"
    assert f.location_from == "callback" and f.claim == "migrate.driver-call-without-context"
    assert "cuMemAlloc_v2 -> CUDA_ERROR_INVALID_CONTEXT" in f.calls[0]


def test_no_context_quiet_when_the_thread_had_a_context_before():
    ev = Events()
    ev.primary_runtime()
    ev.driver("cuCtxSetCurrent", 80, tid=WORKER, context=PRIMARY, line=20)
    ev.driver("cuCtxPopCurrent", 90, tid=WORKER, context=0, line=20)
    ev.driver("cuMemAlloc_v2", 100, tid=WORKER, status="CUDA_ERROR_INVALID_CONTEXT", line=21)
    assert not judge(ev.events, rules=[RULES_BY_ID["no-context"]])


@pytest.mark.parametrize("name", ["cuCtxGetDevice", "cuCtxGetId", "cuDevicePrimaryCtxRelease_v2"])
def test_no_context_quiet_on_probes_and_primary_functions(name):
    ev = Events()
    ev.driver(name, 100, tid=WORKER, status="CUDA_ERROR_INVALID_CONTEXT", line=21)
    assert not judge(ev.events, rules=[RULES_BY_ID["no-context"]])


def test_no_context_quiet_beneath_a_runtime_call():
    ev = Events()
    ev.runtime("cudaGetDevice", 100, end=200, tid=WORKER)
    ev.driver("cuCtxSynchronize", 120, end=130, tid=WORKER, status="CUDA_ERROR_INVALID_CONTEXT", from_="callback")
    assert not judge(ev.events, rules=[RULES_BY_ID["no-context"]])


# ---------------------------------------------------------------- destroyed-while-current

def destroyed_stream(destroyer=MAIN, holder_ctx=CREATED, failing_ctx=None) -> Events:
    ev = Events()
    ev.driver("cuCtxCreate_v4", 10, end=30, context=CREATED, line=20)
    ev.resource("CONTEXT_CREATED", 20, context=CREATED, line=20)
    ev.driver("cuCtxPushCurrent_v2", 40, tid=WORKER, context=holder_ctx, line=26)
    ev.driver("cuCtxDestroy_v2", 50, end=70, tid=destroyer, context=0, line=33)
    ev.resource("CONTEXT_DESTROY_STARTING", 60, tid=destroyer, context=CREATED, line=33)
    ev.driver("cuCtxSynchronize", 80, tid=WORKER, context=holder_ctx if failing_ctx is None else failing_ctx,
              status="CUDA_ERROR_CONTEXT_IS_DESTROYED", line=29)
    return ev


def test_destroyed_while_current_fires_on_the_other_threads_call():
    (f,) = only(judge(destroyed_stream().events), "destroyed-while-current")
    assert f.thread == "worker" and str(f.location) == "app.py:29"
    assert [(what, str(loc)) for what, loc in f.related] == [("destroyed at", "app.py:33")]
    assert any("cuCtxDestroy_v2" in c for c in f.calls) and "MainThread" in f.message


def test_destroyed_while_current_quiet_when_destroyed_on_the_same_thread():
    assert not [f for f in judge(destroyed_stream(destroyer=WORKER).events) if f.rule == "destroyed-while-current"]


def test_destroyed_while_current_quiet_when_the_thread_held_another_context():
    assert not [f for f in judge(destroyed_stream(holder_ctx=OTHER).events) if f.rule == "destroyed-while-current"]


def test_destroyed_while_current_known_from_the_threads_last_call_when_the_failing_one_names_no_context():
    """The failing call records no context (the driver no longer reports the destroyed one): the thread's last
    call before the destroy says which context it had."""
    (f,) = only(judge(destroyed_stream(failing_ctx=0).events), "destroyed-while-current")
    assert f.thread == "worker" and str(f.location) == "app.py:29"
    assert not [f for f in judge(destroyed_stream(holder_ctx=OTHER, failing_ctx=0).events)
                if f.rule == "destroyed-while-current"]


# ---------------------------------------------------------------- primary-released-under-runtime

def released_stream(destroy=True, failure=True, inside_runtime=False) -> Events:
    ev = Events()
    ev.primary_runtime()
    ev.runtime("cudaMalloc", 70, context=PRIMARY)
    if inside_runtime:
        ev.runtime("cudaDeviceReset", 95, end=140, context=PRIMARY, line=40)
    ev.driver("cuDevicePrimaryCtxRelease_v2", 100, end=130, context=PRIMARY, line=40)
    if destroy:
        ev.resource("CONTEXT_DESTROY_STARTING", 110, context=PRIMARY, line=40)
    ev.driver("cuDevicePrimaryCtxRelease_v2", 150, context=PRIMARY, status="CUDA_ERROR_INVALID_CONTEXT", line=40)
    if failure:
        ev.runtime("cudaMemcpyAsync", 200, context=PRIMARY, status="cudaErrorInvalidValue")
    return ev


def test_primary_released_fires_at_the_release_that_destroyed_it():
    (f,) = only(judge(released_stream().events), "primary-released-under-runtime")
    assert str(f.location) == "app.py:40" and f.location_from == "callback"
    assert "cudaMemcpyAsync -> cudaErrorInvalidValue" in f.message
    assert f.claim == "refcount.after-last-release"


@pytest.mark.parametrize("kw", [{"destroy": False}, {"failure": False}, {"inside_runtime": True}])
def test_primary_released_quiet_without_destroy_failure_or_when_the_runtime_released(kw):
    assert not [f for f in judge(released_stream(**kw).events) if f.rule == "primary-released-under-runtime"]


def test_primary_released_quiet_when_only_a_callback_saw_the_release():
    ev = released_stream()
    next(e for e in ev.events if e["name"].startswith("cuDevicePrimaryCtxRelease"))["from"] = "callback"
    assert not [f for f in judge(ev.events) if f.rule == "primary-released-under-runtime"]


# ---------------------------------------------------------------- reset-with-live-allocations

def reset_stream(allocate=True, failure=True, runtime=True) -> Events:
    ev = Events()
    ev.primary_runtime()
    if allocate:
        ev.runtime("cudaMalloc", 70, context=PRIMARY)
    if runtime:
        ev.runtime("cudaDeviceReset", 100, end=160, context=PRIMARY, line=17)
    ev.driver("cuDevicePrimaryCtxReset_v2", 110, end=150, context=PRIMARY, line=17)
    ev.resource("CONTEXT_DESTROY_STARTING", 120, context=PRIMARY, line=17)
    if failure:
        ev.driver("cuLaunchKernel", 200, context=PRIMARY, status="CUDA_ERROR_INVALID_HANDLE")
    return ev


def test_reset_fires_once_for_cudaDeviceReset_and_the_driver_reset_beneath():
    (f,) = only(judge(reset_stream().events), "reset-with-live-allocations")
    assert str(f.location) == "app.py:17" and "cudaDeviceReset" in f.message and "cudaMalloc" in f.message


def test_reset_fires_for_cuDevicePrimaryCtxReset_alone():
    (f,) = only(judge(reset_stream(runtime=False).events), "reset-with-live-allocations")
    assert f.message.startswith("cuDevicePrimaryCtxReset_v2")


@pytest.mark.parametrize("kw", [{"allocate": False}, {"failure": False}])
def test_reset_quiet_without_allocations_or_later_failures(kw):
    findings = judge(reset_stream(**kw).events)
    assert not [f for f in findings if f.rule == "reset-with-live-allocations"]
    if kw.get("failure") is False:
        assert not [f for f in findings if f.severity == "error"]
    else:  # the failing call after the reset is still a finding: with the state it met, the reset named
        (f,) = [f for f in findings if f.severity == "error"]
        assert f.rule == "failed-call" and "already destroyed by cudaDeviceReset" in f.message


# ---------------------------------------------------------------- cross-context-handle

def cross_stream(loaded_in=PRIMARY, destroyed=False) -> Events:
    ev = Events()
    ev.primary_runtime()
    ev.driver("cuModuleLoadData", 70, context=loaded_in, line=18)
    ev.resource("MODULE_LOADED", 72, context=loaded_in, line=18)
    ev.driver("cuCtxCreate_v4", 100, end=120, context=CREATED, line=20)
    ev.resource("CONTEXT_CREATED", 110, context=CREATED, line=20)
    if destroyed:
        ev.resource("CONTEXT_DESTROY_STARTING", 130, context=OTHER)
    ev.driver("cuLaunchKernel", 150, context=CREATED, status="CUDA_ERROR_INVALID_HANDLE")
    return ev


def test_cross_context_handle_located_by_the_programs_exception():
    exc = {"tid": MAIN, "thread": "MainThread", "type": "CUDADriverError",
           "message": "CUDADriverError: CUDA_ERROR_INVALID_HANDLE: invalid resource handle",
           "stack": [["app.py", 21, "main"]], "cuda": True}
    (f,) = only(judge(cross_stream().events, exceptions=[exc]), "cross-context-handle")
    assert str(f.location) == "app.py:21" and f.location_from == "exception"
    assert f"{PRIMARY:#x}" in f.message and f"{CREATED:#x}" in f.message


def test_cross_context_handle_without_an_exception_is_located_nearby():
    (f,) = only(judge(cross_stream().events), "cross-context-handle")
    assert str(f.location) == "app.py:20" and f.location_from == "nearby"


@pytest.mark.parametrize("kw", [{"loaded_in": CREATED}, {"destroyed": True}])
def test_cross_context_handle_quiet_when_loaded_in_the_same_context_or_after_a_destroy(kw):
    assert not [f for f in judge(cross_stream(**kw).events) if f.rule == "cross-context-handle"]


# ---------------------------------------------------------------- fork-after-init

def fork_record(**kw) -> dict:
    record = {"pid": 4242, "parent": 1, "thread": "MainThread", "parent_initialised": True,
              "fork_stack": [["app.py", 19, "main"]],
              "first_call": {"what": "cupy._creation.ranges.arange", "stack": [["app.py", 22, "main"]]},
              "cuda_status": "CUDA_ERROR_NOT_INITIALIZED"}
    record.update(kw)
    return record


def test_fork_after_init_fires_at_the_childs_first_cuda_call():
    (f,) = only(judge([], forks=[fork_record()]), "fork-after-init")
    assert str(f.location) == "app.py:22" and f.location_from == "fork hook" and f.thread == "child 4242"
    assert [(w, str(loc)) for w, loc in f.related] == [("forked at", "app.py:19")]
    assert "CUDA_ERROR_NOT_INITIALIZED" in f.message


@pytest.mark.parametrize("kw", [{"parent_initialised": False}, {"first_call": None}])
def test_fork_after_init_quiet_before_init_or_without_cuda_in_the_child(kw):
    assert not judge([], forks=[fork_record(**kw)])


# ---------------------------------------------------------------- several-runtime-copies

def test_several_runtime_copies_is_info_at_the_second_copy():
    ev = Events()
    ev.primary_runtime(line=5)
    ev.runtime("cudaSetDevice", 100, end=150, context=PRIMARY)
    ev.driver("cuDevicePrimaryCtxRetain", 110, end=120, context=PRIMARY, line=9)
    (f,) = judge(ev.events, rules=[RULES_BY_ID["several-runtime-copies"]])
    assert f.rule == "several-runtime-copies" and f.severity == "info" and str(f.location) == "app.py:9"
    assert [(w, str(loc)) for w, loc in f.related] == [("retained first at", "app.py:5")]


def test_a_retain_only_a_callback_saw_counts_as_a_runtime_copys():
    ev = Events()
    ev.primary_runtime(line=5)
    ev.driver("cuDevicePrimaryCtxRetain", 110, end=120, context=PRIMARY, line=9, **{"from": "callback"})
    (f,) = judge(ev.events, rules=[RULES_BY_ID["several-runtime-copies"]])
    assert f.rule == "several-runtime-copies" and "did not record" in f.message


def test_one_runtime_copy_and_a_driver_retain_are_quiet():
    ev = Events()
    ev.primary_runtime()
    ev.driver("cuDevicePrimaryCtxRetain", 110, end=120, context=PRIMARY, line=9)  # the program's own retain
    assert not judge(ev.events, rules=[RULES_BY_ID["several-runtime-copies"]])


CUDART = "nvidia/cuda_runtime/lib/libcudart.so.13"


def copies_stream(first: list[str], second: list[str]) -> Events:
    """Two runtime calls on two threads, each retaining the primary context beneath it, with their callers."""
    ev = Events()
    ev.runtime("cudaSetDevice", 10, end=60, context=PRIMARY)
    ev.driver("cuDevicePrimaryCtxRetain", 15, end=40, context=PRIMARY, line=5, callers=first,
              **{"from": "callback"})
    ev.runtime("cudaFuncGetAttributes", 100, end=150, tid=WORKER, context=PRIMARY)
    ev.driver("cuDevicePrimaryCtxRetain", 110, end=120, tid=WORKER, context=PRIMARY, line=9, callers=second,
              **{"from": "callback"})
    return ev


def test_two_named_copies_are_named_in_the_finding():
    ev = copies_stream([CUDART, "cupy_backends/cuda/api/runtime.so"], ["cupy/cuda/cub.so", "cupy/_core/core.so"])
    (f,) = judge(ev.events, rules=[RULES_BY_ID["several-runtime-copies"]])
    assert f.message.startswith("2 copies of the CUDA runtime each retained the primary context")
    assert f"{CUDART} called from cupy_backends/cuda/api/runtime.so at cudaSetDevice" in f.message
    assert "cupy/cuda/cub.so called from cupy/_core/core.so at cudaFuncGetAttributes" in f.message
    assert str(f.location) == "app.py:9"


def test_one_copy_retaining_twice_is_one_copy():
    # the same libcudart, called from two of CuPy's modules: one runtime retaining again, not two copies
    ev = copies_stream([CUDART, "cupy_backends/cuda/api/runtime.so"], [CUDART, "cupy/_core/core.so"])
    assert not judge(ev.events, rules=[RULES_BY_ID["several-runtime-copies"]])


def test_unnamed_retains_still_count_as_copies_and_say_so():
    ev = copies_stream([], [])
    (f,) = judge(ev.events, rules=[RULES_BY_ID["several-runtime-copies"]])
    assert "its shared object was not recorded" in f.message and "cudaSetDevice, cudaFuncGetAttributes" in f.message


# ---------------------------------------------------------------- the engine

def test_errors_come_first_and_a_recorded_clean_program_has_no_error():
    doc = json.loads((RESULTS / "first_context.trace.json").read_text())
    findings = judge(doc["events"])
    assert not [f for f in findings if f.severity == "error"], [(f.rule, f.message) for f in findings]
    ev = no_context_stream()
    ev.runtime("cudaSetDevice", 300, end=350, context=PRIMARY)
    ev.driver("cuDevicePrimaryCtxRetain", 310, end=320, context=PRIMARY, line=9)
    ev.driver("cuLaunchKernel", 330, end=331, context=PRIMARY)  # work ran in the primary context: not stray
    assert [f.severity for f in judge(ev.events)] == ["error", "info"]


def test_a_finding_without_any_stack_says_so():
    ev = Events()
    ev.driver("cuMemAlloc_v2", 100, tid=WORKER, status="CUDA_ERROR_INVALID_CONTEXT")
    (f,) = judge(ev.events)
    assert f.location is None and f.location_from == "none"


def test_stream_nearby_stack_is_the_last_one_on_the_thread_before():
    ev = Events()
    ev.driver("cuCtxSetCurrent", 10, tid=WORKER, context=CREATED, line=3)
    ev.driver("cuCtxSetCurrent", 10, tid=MAIN, context=CREATED, line=4)
    later = ev.driver("cuLaunchKernel", 20, tid=WORKER, context=CREATED)
    assert Stream(ev.events).nearby_stack(later)[0][1] == 3


def test_a_superseded_finding_is_dropped_and_the_superseding_one_kept():
    from ctxlab.audit.engine import Hit
    from ctxlab.audit.rules.catalogue import judge_stream
    from ctxlab.audit.rules.rule import Rule

    ev = Events()
    mine = ev.driver("cuMemAlloc_v2", 100, tid=MAIN, line=10)
    theirs = ev.driver("cuMemFree_v2", 200, tid=MAIN, line=11)
    elsewhere = ev.driver("cuMemFree_v2", 300, tid=WORKER, line=12)

    def rules(explains_on: dict, any_thread: bool = False):
        superseded = ("*explains",) if any_thread else ("explains",)
        return [Rule("explained", "warning", "t", "x", "", lambda s: [Hit(mine, "explained")], "c",
                     superseded_by=superseded),
                Rule("explains", "error", "t", "x", "", lambda s: [Hit(explains_on, "explains")], "c")]

    found = judge_stream(Stream(list(ev.events)), rules(theirs))  # the same thread: dropped
    assert [f.rule for f in found] == ["explains"]
    found = judge_stream(Stream(list(ev.events)), rules(elsewhere))  # another thread: both stay
    assert sorted(f.rule for f in found) == ["explained", "explains"]
    found = judge_stream(Stream(list(ev.events)), rules(elsewhere, any_thread=True))  # "*": any thread
    assert [f.rule for f in found] == ["explains"]
