"""The state model (ctxlab.audit.model.state) and the rules that stand on it, on synthetic streams in the tracer's
format:
sticky-error, capture-violation, freed-memory-used, handle-destroyed, out-of-memory, launch-config, the failure
groups that fold a driver call beneath a runtime call and a cudaGetLastError echo, and the endings
(program-crashed, program-hung) read from a RunInfo. Each finding is asserted where its hazard is, and each
condition it depends on has a case that breaks it and shows the finding disappear or change."""

import struct

import pytest

from ctxlab.audit.engine import RunInfo, Stream
from ctxlab.audit.model.one_pass import model
from ctxlab.audit.rules.catalogue import RULES_BY_ID, judge, judge_stream
from ctxlab.tracing.flight import OpenCall
from ctxlab.tracing.stacks_dump import StacksDump, ThreadStack
from tests.audit_events import MAIN, OTHER, PRIMARY, WORKER, Events, stack

ILLEGAL = "CUDA_ERROR_ILLEGAL_ADDRESS"
INVALID_VALUE = "CUDA_ERROR_INVALID_VALUE"
STREAM_A, STREAM_S = 0xA0, 0x5000
F_OLD, F_MID, F_NEW = 0xF1, 0xF2, 0xF3
PTR = 0x7F0000000000
MIB = 1 << 20
GIB = 1 << 30
CUPY_RUNTIME = "cupy_backends/cuda/api/runtime.cpython-312-x86_64-linux-gnu.so"


def rules(findings) -> list[str]:
    return [f.rule for f in findings]


def of(findings, rule_id):
    return [f for f in findings if f.rule == rule_id]


def only(events, rule_id, run=None):
    return judge(events, rules=[RULES_BY_ID[rule_id]], run=run)


def launch(ev: Events, start: int, function: int, line: int, tid: int = MAIN, ctx: int = PRIMARY, **kw) -> dict:
    return ev.driver("cuLaunchKernel", start, tid=tid, context=ctx, line=line,
                     args={"function": function, "stream": STREAM_A}, **kw)


# ---------------------------------------------------------------- sticky-error

def faulted(sync_before: str | None = "cuCtxSynchronize", status: str = ILLEGAL) -> Events:
    """Three launches, a successful full sync after the first, and a sync that returns ``status`` at line 40."""
    ev = Events()
    launch(ev, 100, F_OLD, 10)
    if sync_before:
        ev.driver(sync_before, 150, context=PRIMARY, line=15, args={"stream": STREAM_A}
                  if sync_before.startswith("cuStream") else {})
    launch(ev, 200, F_MID, 20)
    launch(ev, 300, F_NEW, 30)
    ev.driver("cuCtxSynchronize", 400, context=PRIMARY, status=status, line=40)
    return ev


def test_a_sticky_error_is_one_finding_at_the_newest_launch_since_the_last_good_sync():
    ev = faulted()
    (f,) = judge(ev.events)
    assert f.rule == "sticky-error" and f.severity == "error"
    assert str(f.location) == "app.py:30"  # the newest launch since the last synchronisation that succeeded
    assert ("surfaced at", 40) in [(w, loc.line) for w, loc in f.related]
    assert ("also launched before it", 20) in [(w, loc.line) for w, loc in f.related]
    assert "cuCtxSynchronize on thread MainThread returned CUDA_ERROR_ILLEGAL_ADDRESS" in f.message
    assert "at app.py:30" in f.message and "at app.py:20" in f.message
    assert "app.py:10" not in f.message  # launched before the synchronisation that succeeded: not a suspect
    assert 10 not in [loc.line for _, loc in f.related]


def test_without_the_good_sync_the_earlier_launch_is_a_suspect_too():
    (f,) = judge(faulted(sync_before=None).events)
    assert f.rule == "sticky-error" and "at app.py:10" in f.message
    assert ("also launched before it", 10) in [(w, loc.line) for w, loc in f.related]


def test_a_stream_sync_is_not_a_full_synchronisation_of_the_context():
    (f,) = judge(faulted(sync_before="cuStreamSynchronize").events)
    assert "at app.py:10" in f.message  # a stream's sync does not clear the other streams' launches


def test_a_failed_sync_does_not_clear_the_launches_before_it():
    ev = faulted()
    ev.events[1]["status"] = INVALID_VALUE  # the sync at 150 failed (not sticky): it synchronised nothing
    f = of(judge(ev.events), "sticky-error")[0]
    assert "at app.py:10" in f.message


def test_a_non_sticky_error_is_not_a_sticky_error():
    ev = faulted(status=INVALID_VALUE)
    assert rules(judge(ev.events)) == ["failed-call"]
    assert not model(Stream(ev.events)).sticky


def test_with_no_launch_recorded_the_sticky_error_sits_at_the_failing_call():
    ev = Events()
    ev.driver("cuCtxSynchronize", 400, context=PRIMARY, status=ILLEGAL, line=40)
    (f,) = judge(ev.events)
    assert f.rule == "sticky-error" and f.location.line == 40 and "No launch into this context" in f.message


def test_every_later_failing_call_of_the_context_is_folded_into_the_sticky_error():
    ev = faulted()
    ev.driver("cuMemFree_v2", 500, tid=WORKER, context=PRIMARY, status=ILLEGAL, line=50, library="cupy")
    ev.driver("cuMemcpyDtoH_v2", 510, tid=WORKER, context=PRIMARY, status=INVALID_VALUE, line=51)  # another status
    ev.runtime("cudaMemcpy", 520, tid=MAIN, context=0, status="cudaErrorIllegalAddress", line=52)  # no context known
    (f,) = judge(ev.events)
    assert f.rule == "sticky-error"
    assert "After it, 3 failing call(s) of cupy, the program returned errors" in f.message
    assert "cuMemFree_v2 (CUDA_ERROR_ILLEGAL_ADDRESS) on thread worker at app.py:50" in f.message
    assert "cuMemcpyDtoH_v2 (CUDA_ERROR_INVALID_VALUE) on thread worker at app.py:51" in f.message
    assert "cudaMemcpy (cudaErrorIllegalAddress) on thread MainThread at app.py:52" in f.message


def test_a_failing_call_of_another_context_or_before_the_fault_is_not_folded():
    ev = faulted()
    ev.driver("cuMemFree_v2", 500, tid=WORKER, context=OTHER, status=INVALID_VALUE, line=50)  # another context
    ev.driver("cuMemsetD32_v2", 120, context=PRIMARY, status=INVALID_VALUE, line=12)  # before the fault
    ev.runtime("cudaMemcpy", 520, context=0, status="cudaErrorInvalidValue", line=52)  # no context, not sticky
    found = judge(ev.events)
    assert sorted(rules(found)) == ["failed-call", "failed-call", "failed-call", "sticky-error"]
    assert sorted(f.location.line for f in of(found, "failed-call")) == [12, 50, 52]
    assert "After it" not in of(found, "sticky-error")[0].message


def test_the_kernels_name_from_the_run_is_in_the_message():
    ev = faulted()
    (f,) = judge(ev.events, run=RunInfo(kernels={F_NEW: "scatter_add", F_MID: "gather"}))
    assert "kernel scatter_add on stream 0xa0 on thread MainThread at app.py:30" in f.message
    assert "kernel gather on stream 0xa0" in f.message
    (f,) = judge(ev.events)  # without the names: the call that launched it
    assert "scatter_add" not in f.message and "a kernel (cuLaunchKernel) on stream 0xa0" in f.message


def test_a_pinned_launch_from_a_serialised_rerun_is_where_the_finding_sits():
    ev = faulted()
    pinned = {"kernel": "kernel scatter_add", "thread": "worker", "place": " at app.py:77",
              "event": {"tid": WORKER, "thread": "worker", "start": 300, "stack": stack(77)}}
    (f,) = judge(ev.events, run=RunInfo(pinned={PRIMARY: pinned}))
    assert f.rule == "sticky-error" and f.location.line == 77
    assert "the fault is kernel scatter_add, launched on thread worker at app.py:77" in f.message
    assert "newest first" not in f.message
    (f,) = judge(ev.events, run=RunInfo(pinned={OTHER: pinned}))  # pinned in another context: not this one's
    assert f.location.line == 30 and "app.py:77" not in f.message


def test_a_runtime_launch_is_named_by_the_kernel_of_the_driver_launch_beneath_it():
    ev = Events()
    ev.runtime("cudaLaunchKernel", 100, end=130, context=PRIMARY, line=10, args={"stream": STREAM_A})
    ev.driver("cuLaunchKernel", 110, end=120, context=PRIMARY, args={"function": F_NEW, "stream": STREAM_A},
              **{"from": "callback"})
    ev.runtime("cudaDeviceSynchronize", 200, context=PRIMARY, line=20, status="cudaErrorIllegalAddress")
    (f,) = judge(ev.events, run=RunInfo(kernels={F_NEW: "scatter_add"}))
    assert f.rule == "sticky-error" and f.location.line == 10
    assert "newest first: kernel scatter_add on stream 0xa0 on thread MainThread at app.py:10." in f.message
    (f,) = judge(ev.events, run=RunInfo(kernels={F_OLD: "gather"}))  # the kernel is not one the run named
    assert "newest first: a kernel (cudaLaunchKernel) on stream 0xa0" in f.message


def test_a_second_contexts_own_fault_is_not_folded_into_the_first_contexts_finding():
    ev = Events()
    launch(ev, 100, F_OLD, 10)
    launch(ev, 110, F_NEW, 11, ctx=OTHER)
    ev.driver("cuCtxSynchronize", 200, context=PRIMARY, status=ILLEGAL, line=20)
    ev.driver("cuCtxSynchronize", 300, context=OTHER, status=ILLEGAL, line=30)
    first, second = sorted(judge(ev.events), key=lambda f: f.location.line)
    assert (first.rule, first.location.line, second.rule, second.location.line) == ("sticky-error", 10,
                                                                                    "sticky-error", 11)
    assert "context 0x7f00bb00" in second.message
    assert "app.py:30" not in first.message


# ---------------------------------------------------------------- capture-violation

def captured(mode: int = 0, sync_tid: int = WORKER, sync_at: int = 150) -> Events:
    ev = Events()
    ev.runtime("cudaStreamBeginCapture", 100, context=PRIMARY, line=10, args={"stream": 0xC0, "mode": mode})
    ev.runtime("cudaDeviceSynchronize", sync_at, tid=sync_tid, context=PRIMARY, line=20,
               status="cudaErrorStreamCaptureUnsupported")
    ev.runtime("cudaStreamEndCapture", 200, context=PRIMARY, line=30, args={"stream": 0xC0},
               status="cudaErrorStreamCaptureInvalidated")
    return ev


def test_a_sync_on_another_thread_during_a_global_capture_is_one_capture_violation():
    found = judge(captured().events)
    (f,) = found  # the end capture's failure is folded in: no second finding, no failed-call
    assert f.rule == "capture-violation" and f.location.line == 20 and f.thread == "worker"
    assert "from thread worker, another thread than the capturing one" in f.message
    assert "(global mode, begun with cudaStreamBeginCapture on thread MainThread at app.py:10)" in f.message
    assert "in global mode no thread may make an unsafe call" in f.message
    assert "cudaStreamEndCapture then returned cudaErrorStreamCaptureInvalidated" in f.message
    assert [(w, loc.line) for w, loc in f.related] == [("capture begun at", 10)]


def test_a_thread_local_capture_or_the_capturing_thread_is_named_as_such():
    (f,) = judge(captured(mode=1).events)
    assert "thread-local mode" in f.message and "in global mode" not in f.message
    (f,) = judge(captured(sync_tid=MAIN).events)
    assert "on thread MainThread, the capturing thread" in f.message and "in global mode" not in f.message


def test_a_failing_call_after_the_capture_ended_is_not_a_capture_violation():
    ev = captured()
    ev.events[1]["status"] = "cudaErrorInvalidValue"  # a failure of its own during the capture: not the capture's
    found = judge(ev.events)
    assert "capture-violation" not in rules(found)
    assert any("was capturing a graph (global mode)" in f.message for f in found)  # the state it met says so
    ev = captured(sync_at=300)  # the sync comes after the end capture, which ended the capture cleanly
    ev.events[1]["status"] = "cudaErrorInvalidValue"
    ev.events[2]["status"] = "cudaSuccess"
    found = judge(ev.events)
    assert rules(found) == ["failed-call"] and found[0].location.line == 20


def test_an_end_capture_failing_with_no_violation_is_a_failed_call():
    ev = captured()
    del ev.events[1]
    (f,) = judge(ev.events)
    assert f.rule == "failed-call" and f.location.line == 30


def test_a_capture_status_with_no_capture_in_progress_names_the_last_capture_begun():
    ev = Events()
    for i, stream in enumerate((0xC0, 0xC1)):
        ev.runtime("cudaStreamBeginCapture", 100 + 100 * i, context=PRIMARY, line=10 + i,
                   args={"stream": stream, "mode": 2})
        ev.runtime("cudaStreamEndCapture", 150 + 100 * i, context=PRIMARY, line=20 + i, args={"stream": stream})
    ev.runtime("cudaMalloc", 400, tid=WORKER, context=PRIMARY, line=40, status="cudaErrorStreamCaptureImplicit")
    (f,) = judge(ev.events)
    assert f.rule == "capture-violation" and f.location.line == 40
    assert "stream 0xc1 was capturing a graph (relaxed mode" in f.message and "0xc0" not in f.message
    ev.events[-1]["status"] = "cudaErrorInvalidValue"  # not a capture status: nothing to tie it to a capture
    assert rules(judge(ev.events)) == ["failed-call"]


@pytest.mark.parametrize("mode", [1, 2])
def test_another_threads_failure_during_a_thread_local_or_relaxed_capture_is_not_a_capture_violation(mode):
    ev = Events()
    allocated(ev, start=50, line=5)
    ev.driver("cuMemFree_v2", 60, context=PRIMARY, line=6, args={"ptr": PTR})
    ev.runtime("cudaStreamBeginCapture", 100, context=PRIMARY, line=10, args={"stream": 0xC0, "mode": mode})
    ev.driver("cuMemFree_v2", 150, tid=WORKER, context=PRIMARY, line=20, args={"ptr": PTR}, status=INVALID_VALUE)
    ev.runtime("cudaStreamEndCapture", 200, context=PRIMARY, line=30, args={"stream": 0xC0})  # it succeeded
    (f,) = judge(ev.events)
    assert f.rule == "freed-memory-used" and f.location.line == 20


# ---------------------------------------------------------------- freed-memory-used

def allocated(ev: Events, start: int = 100, line: int = 10, ptr: int = PTR, size: int = 4096) -> dict:
    return ev.driver("cuMemAlloc_v2", start, context=PRIMARY, line=line, args={"ptr": ptr, "size": size})


def test_memory_freed_twice_is_freed_again_naming_where_it_was_freed():
    ev = Events()
    allocated(ev)
    ev.driver("cuMemFree_v2", 200, context=PRIMARY, line=20, args={"ptr": PTR})
    ev.driver("cuMemFree_v2", 300, context=PRIMARY, line=30, args={"ptr": PTR}, status=INVALID_VALUE)
    (f,) = judge(ev.events)
    assert f.rule == "freed-memory-used" and f.location.line == 30
    assert "the 4096-byte allocation at 0x7f0000000000" in f.message and "was freed again" in f.message
    assert "after cuMemFree_v2 on thread MainThread at app.py:20 had freed it" in f.message
    assert [(w, loc.line) for w, loc in f.related] == [("freed at", 20), ("allocated at", 10)]


def test_a_copy_into_a_freed_block_is_a_use_after_free():
    ev = Events()
    allocated(ev)
    ev.driver("cuMemFree_v2", 200, context=PRIMARY, line=20, args={"ptr": PTR})
    ev.driver("cuMemcpyDtoH_v2", 300, context=PRIMARY, line=30, args={"ptr": PTR + 64}, status=INVALID_VALUE)
    (f,) = judge(ev.events)
    assert f.rule == "freed-memory-used" and f.location.line == 30
    assert "was used (ptr 0x7f0000000040) after cuMemFree_v2" in f.message and "freed again" not in f.message


def test_a_copy_before_the_free_or_after_the_block_was_allocated_again_is_not_a_use_after_free():
    ev = Events()
    allocated(ev)
    ev.driver("cuMemcpyDtoH_v2", 150, context=PRIMARY, line=15, args={"ptr": PTR}, status=INVALID_VALUE)
    ev.driver("cuMemFree_v2", 200, context=PRIMARY, line=20, args={"ptr": PTR})
    assert rules(judge(ev.events)) == ["failed-call"]  # it failed, but not for a free that came later
    ev = Events()
    allocated(ev)
    ev.driver("cuMemFree_v2", 200, context=PRIMARY, line=20, args={"ptr": PTR})
    allocated(ev, start=250, line=25)  # the driver handed the same address out again
    ev.driver("cuMemcpyDtoH_v2", 300, context=PRIMARY, line=30, args={"ptr": PTR}, status=INVALID_VALUE)
    ev.driver("cuMemFree_v2", 400, context=PRIMARY, line=40, args={"ptr": PTR}, status=INVALID_VALUE)
    assert "freed-memory-used" not in rules(judge(ev.events))


def test_a_pointer_outside_the_freed_block_is_not_in_it():
    ev = Events()
    allocated(ev)
    ev.driver("cuMemFree_v2", 200, context=PRIMARY, line=20, args={"ptr": PTR})
    ev.driver("cuMemcpyDtoH_v2", 300, context=PRIMARY, line=30, args={"ptr": PTR + 4096}, status=INVALID_VALUE)
    assert rules(judge(ev.events)) == ["failed-call"]


def test_a_copy_into_a_freed_block_that_returned_success_is_still_a_use_after_free():
    ev = Events()
    allocated(ev)
    ev.driver("cuMemFree_v2", 200, context=PRIMARY, line=20, args={"ptr": PTR})
    ev.driver("cuMemcpyDtoH_v2", 300, context=PRIMARY, line=30, args={"ptr": PTR})
    (f,) = only(ev.events, "freed-memory-used")
    assert f.location.line == 30 and " ran: " in f.message


def kernel_arguments(*values: int) -> bytes:
    """A launch's kept arguments as the tracer packs them: (index, size) then the bytes, each an 8-byte value."""
    return b"".join(struct.pack("<II", i, 8) + v.to_bytes(8, "little") for i, v in enumerate(values))


def test_a_launch_passed_a_pointer_into_a_freed_block_ran_on_freed_memory():
    ev = Events()
    allocated(ev)
    ev.driver("cuMemFree_v2", 200, context=PRIMARY, line=20, args={"ptr": PTR})
    ev.driver("cuLaunchKernel", 300, context=PRIMARY, line=30, args={"function": F_NEW, "stream": 0},
              arguments=kernel_arguments(7, PTR + 8))
    (f,) = judge(ev.events)
    assert f.rule == "freed-memory-used" and f.location.line == 30
    assert "cuLaunchKernel on thread MainThread ran: " in f.message and "(parameter 1 0x7f0000000008)" in f.message
    ev.events[-1]["arguments"] = kernel_arguments(7, PTR + 4096)  # past the block's end
    assert not judge(ev.events)
    ev = Events()
    allocated(ev)
    ev.driver("cuLaunchKernel", 150, context=PRIMARY, line=15, args={"function": F_NEW, "stream": 0},
              arguments=kernel_arguments(PTR))  # launched while the block was live
    ev.driver("cuMemFree_v2", 200, context=PRIMARY, line=20, args={"ptr": PTR})
    assert not judge(ev.events)


def test_a_free_of_a_pointer_inside_a_freed_block_is_a_use_not_a_second_free():
    ev = Events()
    allocated(ev)
    ev.driver("cuMemFree_v2", 200, context=PRIMARY, line=20, args={"ptr": PTR})
    ev.driver("cuMemFree_v2", 300, context=PRIMARY, line=30, args={"ptr": PTR + 16}, status=INVALID_VALUE)
    (f,) = judge(ev.events)
    assert f.rule == "freed-memory-used" and "was used (ptr 0x7f0000000010)" in f.message
    assert "freed again" not in f.message


# ---------------------------------------------------------------- handle-destroyed

HANDLES = (  # (kind, create, its arg, destroy, a call that uses it)
    ("stream", "cuStreamCreate", "stream", "cuStreamDestroy_v2", "cuStreamSynchronize"),
    ("event", "cuEventCreate", "event", "cuEventDestroy_v2", "cuEventSynchronize"),
    ("module", "cuModuleLoadData", "module", "cuModuleUnload", "cuModuleGetFunction"),
)


@pytest.mark.parametrize("kind,create,key,destroy,use", HANDLES)
def test_a_handle_used_after_its_destroy_names_the_destroy(kind, create, key, destroy, use):
    ev = Events()
    ev.driver(create, 100, context=PRIMARY, line=10, args={key: STREAM_S})
    ev.driver(destroy, 200, context=PRIMARY, line=20, args={key: STREAM_S})
    ev.driver(use, 300, tid=WORKER, context=PRIMARY, line=30, args={key: STREAM_S},
              status="CUDA_ERROR_INVALID_HANDLE")
    (f,) = judge(ev.events)
    assert f.rule == "handle-destroyed" and f.location.line == 30 and f.thread == "worker"
    assert (f"its {key} 0x5000 ({kind} made by {create} on thread MainThread at app.py:10) had been released by "
            f"{destroy} on thread MainThread at app.py:20") in f.message
    assert [(w, loc.line) for w, loc in f.related] == [("destroyed at", 20), ("made at", 10)]


def test_a_use_before_the_destroy_is_not_a_destroyed_handle():
    ev = Events()
    ev.driver("cuStreamCreate", 100, context=PRIMARY, line=10, args={"stream": STREAM_S})
    ev.driver("cuStreamSynchronize", 150, context=PRIMARY, line=15, args={"stream": STREAM_S},
              status="CUDA_ERROR_INVALID_HANDLE")
    ev.driver("cuStreamDestroy_v2", 200, context=PRIMARY, line=20, args={"stream": STREAM_S})
    assert rules(judge(ev.events)) == ["failed-call"]


def test_a_failed_destroy_or_a_new_handle_of_the_same_value_keeps_it_alive():
    ev = Events()
    ev.driver("cuStreamCreate", 100, context=PRIMARY, line=10, args={"stream": STREAM_S})
    ev.driver("cuStreamDestroy_v2", 200, context=PRIMARY, line=20, args={"stream": STREAM_S},
              status="CUDA_ERROR_INVALID_CONTEXT")
    ev.driver("cuStreamSynchronize", 300, context=PRIMARY, line=30, args={"stream": STREAM_S},
              status="CUDA_ERROR_INVALID_HANDLE")
    assert "handle-destroyed" not in rules(judge(ev.events))
    ev = Events()
    ev.driver("cuStreamCreate", 100, context=PRIMARY, line=10, args={"stream": STREAM_S})
    ev.driver("cuStreamDestroy_v2", 200, context=PRIMARY, line=20, args={"stream": STREAM_S})
    ev.driver("cuStreamCreate", 250, context=PRIMARY, line=25, args={"stream": STREAM_S})  # the value reused
    ev.driver("cuStreamSynchronize", 300, context=PRIMARY, line=30, args={"stream": STREAM_S},
              status="CUDA_ERROR_INVALID_HANDLE")
    assert rules(judge(ev.events)) == ["failed-call"]


# ---------------------------------------------------------------- out-of-memory

def memory_held(ev: Events, free_program_block: bool = False) -> None:
    """1 GiB allocated by CuPy (its cudaMalloc, the driver's cuMemAlloc beneath), 512 MiB by the program, and
    256 MiB the program allocated and freed."""
    ev.runtime("cudaMalloc", 100, end=150, context=PRIMARY, line=10, args={"ptr": PTR, "size": GIB},
               callers=[CUPY_RUNTIME])
    ev.driver("cuMemAlloc_v2", 110, end=120, context=PRIMARY, args={"ptr": PTR, "size": GIB},
              **{"from": "callback"})
    ev.driver("cuMemAlloc_v2", 200, context=PRIMARY, line=20, args={"ptr": PTR + 2 * GIB, "size": 512 * MIB})
    ev.driver("cuMemAlloc_v2", 220, context=PRIMARY, line=22, args={"ptr": PTR + 3 * GIB, "size": 256 * MIB})
    ev.driver("cuMemFree_v2", 240, context=PRIMARY, line=24, args={"ptr": PTR + 3 * GIB})
    if free_program_block:
        ev.driver("cuMemFree_v2", 260, context=PRIMARY, line=26, args={"ptr": PTR + 2 * GIB})


def oom(ev: Events, start: int = 300, line: int = 30) -> dict:
    return ev.driver("cuMemAlloc_v2", start, context=PRIMARY, line=line, args={"size": 2 * GIB},
                     status="CUDA_ERROR_OUT_OF_MEMORY")


def test_an_allocation_out_of_memory_names_what_each_library_held():
    ev = Events()
    memory_held(ev)
    oom(ev)
    (f,) = judge(ev.events)
    assert f.rule == "out-of-memory" and f.location.line == 30
    assert ("cuMemAlloc_v2 of 2.0 GiB on thread MainThread returned CUDA_ERROR_OUT_OF_MEMORY: the process held "
            "cupy 1.0 GiB, the program 512 MiB in allocations not freed") in f.message  # the freed 256 MiB not counted


def test_what_was_freed_before_the_failure_is_not_held():
    ev = Events()
    memory_held(ev, free_program_block=True)
    oom(ev)
    (f,) = judge(ev.events)
    assert "the process held cupy 1.0 GiB in allocations not freed" in f.message and "program 512" not in f.message


def test_without_a_librarys_native_caller_the_memory_is_the_programs():
    ev = Events()
    memory_held(ev)
    oom(ev)
    del ev.events[0]["callers"]
    (f,) = judge(ev.events)
    assert "the process held the program 1.5 GiB in allocations not freed" in f.message
    assert "cupy 1.0 GiB" not in f.message


def test_two_failing_attempts_at_one_line_are_one_finding_and_another_line_is_another():
    ev = Events()
    memory_held(ev)
    oom(ev, 300)
    oom(ev, 310)  # a retry at the same line
    assert rules(judge(ev.events)) == ["out-of-memory"]
    oom(ev, 320, line=32)
    assert sorted(f.location.line for f in judge(ev.events)) == [30, 32]


def test_a_runtime_allocation_out_of_memory_is_one_finding_for_the_driver_call_beneath_it():
    ev = Events()
    memory_held(ev)
    ev.runtime("cudaMalloc", 300, end=350, context=PRIMARY, line=30, args={"size": 2 * GIB},
               status="cudaErrorMemoryAllocation", callers=[CUPY_RUNTIME])
    ev.driver("cuMemAlloc_v2", 310, end=320, context=PRIMARY, args={"size": 2 * GIB},
              status="CUDA_ERROR_OUT_OF_MEMORY", **{"from": "callback"})
    (f,) = judge(ev.events)
    assert f.rule == "out-of-memory" and f.location.line == 30 and f.message.startswith("cudaMalloc of 2.0 GiB")


def test_another_failure_of_an_allocation_is_not_out_of_memory():
    ev = Events()
    memory_held(ev)
    oom(ev)["status"] = INVALID_VALUE
    assert rules(judge(ev.events)) == ["failed-call"]


def test_memory_held_on_another_gpu_is_not_counted_against_this_one():
    ev = Events()
    ev.driver("cuDevicePrimaryCtxRetain", 10, context=PRIMARY, line=1, args={"ctx": PRIMARY, "device": 0})
    ev.driver("cuCtxCreate_v4", 20, context=OTHER, line=2, args={"ctx": OTHER, "device": 1})
    ev.driver("cuMemAlloc_v2", 100, context=OTHER, line=3, args={"ptr": PTR, "size": GIB})  # on GPU 1
    ev.driver("cuMemAlloc_v2", 110, context=PRIMARY, line=4, args={"ptr": PTR + 2 * GIB, "size": 512 * MIB})
    ev.driver("cuMemAlloc_v2", 200, context=PRIMARY, line=5, args={"size": GIB}, status="CUDA_ERROR_OUT_OF_MEMORY")
    (f,) = of(judge(ev.events), "out-of-memory")
    assert "the process held the program 512 MiB in allocations not freed" in f.message


# ---------------------------------------------------------------- launch-config

def bad_launch(block=(1025, 1, 1), shared: int = 0, status: str = INVALID_VALUE, **args) -> Events:
    ev = Events()
    ev.driver("cuLaunchKernel", 100, context=PRIMARY, line=10, status=status,
              args={"function": F_NEW, "stream": STREAM_A, "grid_xy": 4 | 1 << 32,
                    "block_xy": block[0] | block[1] << 32, "block_z_shared": block[2] | shared << 32, **args})
    return ev


def test_a_block_of_more_than_1024_threads_is_a_launch_config_finding():
    (f,) = judge(bad_launch().events)
    assert f.rule == "launch-config" and f.location.line == 10
    assert "a block of 1025 x 1 x 1 = 1025 threads, over the 1024 a block may have" in f.message
    (f,) = judge(bad_launch(block=(32, 32, 2)).events)  # threads counted over all three dimensions
    assert f.rule == "launch-config" and "= 2048 threads" in f.message


def test_a_block_of_1024_threads_and_nothing_else_wrong_is_a_failed_call():
    (f,) = judge(bad_launch(block=(1024, 1, 1)).events)
    assert f.rule == "failed-call"
    (f,) = judge(bad_launch(shared=48 * 1024, block=(256, 1, 1)).events)  # at the limit: allowed
    assert f.rule == "failed-call"


def test_dynamic_shared_memory_over_48_kib_is_named():
    (f,) = judge(bad_launch(block=(256, 1, 1), shared=48 * 1024 + 1).events)
    assert f.rule == "launch-config" and "49153 bytes of dynamic shared memory, over the 49152" in f.message
    assert "threads, over" not in f.message


def test_a_block_depth_over_64_is_named():
    (f,) = judge(bad_launch(block=(1, 1, 65)).events)
    assert f.rule == "launch-config" and "a block depth of 65, over 64" in f.message


def test_a_launch_that_failed_for_another_reason_or_without_its_shape_is_not_launch_config():
    (f,) = judge(bad_launch(status="CUDA_ERROR_INVALID_HANDLE").events)
    assert f.rule == "failed-call"
    ev = bad_launch()
    ev.events[0]["args"] = {"function": F_NEW, "stream": STREAM_A}  # the shape was not kept
    (f,) = judge(ev.events)
    assert f.rule == "failed-call"
    ev = bad_launch()
    ev.events[0]["status"] = "CUDA_SUCCESS"
    assert not judge(ev.events)


def test_a_runtime_launchs_own_shared_memory_field_counts():
    ev = Events()
    ev.runtime("cudaLaunchKernel", 100, context=PRIMARY, line=10, status="cudaErrorInvalidConfiguration",
               args={"grid_xy": 1 | 1 << 32, "block_xy": 128 | 1 << 32, "block_z_shared": 1, "shared": 64 * 1024})
    (f,) = judge(ev.events)
    assert f.rule == "launch-config" and "65536 bytes of dynamic shared memory" in f.message


# ---------------------------------------------------------------- failure groups

def runtime_over_driver(driver_tid: int = MAIN, driver_at: int = 120) -> Events:
    ev = Events()
    ev.runtime("cudaMemcpy", 100, end=200, context=PRIMARY, line=10, status="cudaErrorInvalidValue")
    ev.driver("cuMemcpyDtoH_v2", driver_at, end=driver_at + 10, tid=driver_tid, context=PRIMARY,
              status=INVALID_VALUE, **{"from": "callback"})
    return ev


def test_a_driver_call_failing_beneath_a_failing_runtime_call_is_one_finding():
    (f,) = judge(runtime_over_driver().events)
    assert f.rule == "failed-call" and f.location.line == 10
    assert f.message.startswith("cudaMemcpy on thread MainThread returned cudaErrorInvalidValue "
                                "(cuMemcpyDtoH_v2 beneath it returned CUDA_ERROR_INVALID_VALUE)")


def test_a_driver_call_outside_the_runtime_call_or_on_another_thread_is_its_own_failure():
    for ev in (runtime_over_driver(driver_tid=WORKER), runtime_over_driver(driver_at=250)):
        found = judge(ev.events)
        assert rules(found) == ["failed-call", "failed-call"]
        assert not any("beneath it returned" in f.message for f in found)


def test_a_get_last_error_after_a_failing_call_is_folded_into_it():
    ev = runtime_over_driver()
    ev.runtime("cudaGetLastError", 300, context=PRIMARY, line=30, status="cudaErrorInvalidValue")
    (f,) = judge(ev.events)
    assert f.location.line == 10
    s = Stream(ev.events)
    m = model(s)
    assert [e["name"] for e in m.failure_of(ev.events[-1])] == ["cudaMemcpy", "cuMemcpyDtoH_v2", "cudaGetLastError"]


def test_a_get_last_error_on_another_thread_or_before_any_failure_is_its_own():
    ev = runtime_over_driver()
    ev.runtime("cudaGetLastError", 300, tid=WORKER, context=PRIMARY, line=30, status="cudaErrorInvalidValue")
    assert sorted(f.location.line for f in judge(ev.events)) == [10, 30]
    ev = runtime_over_driver()
    ev.runtime("cudaGetLastError", 50, context=PRIMARY, line=5, status="cudaErrorInvalidValue")
    assert sorted(f.location.line for f in judge(ev.events)) == [5, 10]


def test_a_rule_explaining_one_call_of_a_failure_explains_the_whole_group():
    ev = Events()
    launch(ev, 50, F_NEW, 5)
    ev.runtime("cudaDeviceSynchronize", 100, end=200, context=PRIMARY, line=10, status="cudaErrorIllegalAddress")
    ev.driver("cuCtxSynchronize", 120, end=130, context=PRIMARY, status=ILLEGAL, **{"from": "callback"})
    ev.runtime("cudaGetLastError", 300, context=PRIMARY, line=30, status="cudaErrorIllegalAddress")
    s = Stream(ev.events)
    (f,) = judge_stream(s)
    assert f.rule == "sticky-error" and f.location.line == 5
    assert {id(e) for e in ev.events[1:]} <= s.explained


# ---------------------------------------------------------------- program-crashed, program-hung

@pytest.fixture
def app(tmp_path) -> str:
    """A user file that exists (faulthandler's frames count as the user's only where their file does)."""
    path = tmp_path / "app.py"
    path.write_text("# the audited program\n")
    return str(path)


MAIN_IDENT, WORKER_IDENT = 0x7F0100, 0x7F0200


def crash_run(app: str, *, idents=True, open_calls=(), ending=None) -> RunInfo:
    dump = StacksDump("Segmentation fault", [
        ThreadStack(MAIN_IDENT, True, [["/usr/lib/python3.12/threading.py", 1, "run"], [app, 42, "crash_here"],
                                       [app, 99, "<module>"]]),
        ThreadStack(WORKER_IDENT, False, [[app, 7, "spin"]])])
    return RunInfo(ending=ending or {"how": "signal", "signal": "SIGSEGV"}, fatal=[dump], open_calls=list(open_calls),
                   idents={MAIN: MAIN_IDENT, WORKER: WORKER_IDENT} if idents else {},
                   threads={MAIN: "MainThread", WORKER: "worker"})


def stream_life(ev: Events) -> None:
    ev.driver("cuStreamCreate", 100, context=PRIMARY, line=10, args={"stream": STREAM_S})
    ev.driver("cuStreamDestroy_v2", 200, context=PRIMARY, line=20, args={"stream": STREAM_S})


def inside(tid=MAIN, call="cuStreamSynchronize", since=300, arg=STREAM_S, held_gil=False, frames=()) -> OpenCall:
    return OpenCall(tid=tid, thread={MAIN: "MainThread", WORKER: "worker"}[tid], call=call, inner=call, since=since,
                    inner_since=since, context=PRIMARY, held_gil=held_gil, stack=list(frames), inner_arg=arg)


def test_a_crash_is_found_at_the_crashing_threads_user_frame(app):
    ev = Events()
    stream_life(ev)
    (f,) = judge(ev.events, run=crash_run(app))
    assert f.rule == "program-crashed" and f.location_from == "flight recorder"
    assert (f.location.file, f.location.line) == (app, 42)  # its first user frame, not the library's
    assert "died by SIGSEGV on thread MainThread, after its last CUDA call, cuStreamDestroy_v2" in f.message
    assert f"Other threads: worker at {app}:7 in spin." in f.message


def test_a_crash_inside_a_call_on_a_destroyed_stream_names_the_stream(app):
    ev = Events()
    stream_life(ev)
    (f,) = judge(ev.events, run=crash_run(app, open_calls=[inside()]))
    assert f.rule == "program-crashed" and f.location.line == 42
    assert ("inside cuStreamSynchronize (its stream 0x5000 (made by cuStreamCreate at app.py:10) had been destroyed "
            "by cuStreamDestroy_v2 on thread MainThread at app.py:20: a destroyed handle was used)") in f.message
    (f,) = judge(ev.events, run=crash_run(app, open_calls=[inside(since=150)]))  # entered before the destroy
    assert "inside cuStreamSynchronize" in f.message and "destroyed" not in f.message
    (f,) = judge(ev.events, run=crash_run(app, open_calls=[inside(tid=WORKER)]))  # another thread's call
    assert "inside cuStreamSynchronize" not in f.message


def test_a_crashing_thread_the_run_cannot_map_is_named_by_its_ident(app):
    ev = Events()
    stream_life(ev)
    (f,) = judge(ev.events, run=crash_run(app, idents=False, open_calls=[inside()]))
    assert f.location.line == 42 and "on thread thread 0x7f0100" in f.message
    assert "cuStreamSynchronize" not in f.message  # its open call cannot be tied to it


def test_no_crash_without_a_signal_ending(app):
    ev = Events()
    stream_life(ev)
    assert not judge(ev.events, run=crash_run(app, ending={"how": "exit", "code": 0}))
    assert not judge(ev.events, run=None)


def hung_run(how="timeout", seconds=12.5, exits=(), open_calls=None, kernels=None) -> RunInfo:
    calls = open_calls if open_calls is not None else [
        inside(held_gil=True, frames=stack(55), arg=0x6000),
        inside(tid=WORKER, call="cuCtxSynchronize", arg=0, frames=stack(66))]
    return RunInfo(ending={"how": how, "detail": "60 s"}, open_calls=calls, exits=list(exits),
                   seconds_inside={MAIN: seconds, WORKER: 3.0}, threads={MAIN: "MainThread", WORKER: "worker"},
                   kernels=kernels or {})


def test_a_timeout_is_one_program_hung_per_stuck_thread():
    ev = Events()
    found = judge(ev.events, run=hung_run())
    assert rules(found) == ["program-hung", "program-hung"]
    main, worker = sorted(found, key=lambda f: f.location.line)
    assert main.location.line == 55 and worker.location.line == 66
    assert "ran past the audit's time limit (60 s): thread MainThread was inside cuStreamSynchronize for 12.5 s" in (
        main.message)
    assert "It held the GIL" in main.message and "It held the GIL" not in worker.message
    assert "thread worker was inside cuCtxSynchronize for 3.0 s" in worker.message


def test_a_timeout_with_no_thread_in_a_call_waited_in_python():
    (f,) = judge([], run=hung_run(open_calls=[]))
    assert f.rule == "program-hung" and "no thread was inside a CUDA call: it waited in Python" in f.message


def test_a_hung_sync_names_the_kernel_it_waits_for_unless_a_sync_finished_after_it():
    ev = Events()
    launch(ev, 100, F_NEW, 10)
    run = hung_run(open_calls=[inside(call="cuCtxSynchronize", arg=0, frames=stack(55))], kernels={F_NEW: "spin"})
    (f,) = judge(ev.events, run=run)
    assert "It waits for work launched before it that never finished: kernel spin on stream 0xa0" in f.message
    ev.driver("cuCtxSynchronize", 200, context=PRIMARY, line=20)
    (f,) = judge(ev.events, run=run)
    assert "It waits for" not in f.message


OS_EXIT = {"call": "os._exit", "args": "1", "tid": MAIN, "thread": "MainThread", "stack": stack(80)}


def test_os_exit_with_a_thread_stuck_for_seconds_is_a_hang():
    stuck = [inside(tid=WORKER, call="cuStreamSynchronize", arg=0, frames=stack(66))]
    (f,) = judge([], run=hung_run("exit", exits=[OS_EXIT], open_calls=stuck))
    assert f.rule == "program-hung" and f.location.line == 66
    assert "ended itself with os._exit while threads were stuck" in f.message and "for 3.0 s" in f.message


def test_os_exit_with_a_thread_in_a_call_for_under_two_seconds_or_a_plain_exit_is_no_hang():
    short = RunInfo(ending={"how": "exit"}, exits=[OS_EXIT], seconds_inside={WORKER: 1.5},
                    open_calls=[inside(tid=WORKER, arg=0, frames=stack(66))])
    assert not judge([], run=short)
    short.seconds_inside[WORKER] = 2.0  # the threshold itself counts as stuck
    assert rules(judge([], run=short)) == ["program-hung"]
    plain = RunInfo(ending={"how": "exit"}, exits=[{**OS_EXIT, "call": "os.kill"}], seconds_inside={WORKER: 9.0},
                    open_calls=[inside(tid=WORKER, arg=0, frames=stack(66))])
    assert not judge([], run=plain)
    plain.exits = []
    assert not judge([], run=plain)


def test_a_call_that_ran_on_freed_memory_is_not_judged_after_memory_was_mapped_there():
    ev = Events()
    allocated(ev, start=50, line=5)
    ev.driver("cuMemFree_v2", 60, context=PRIMARY, line=6, args={"ptr": PTR})
    ev.driver("cuMemcpyDtoH_v2", 80, context=PRIMARY, line=8, args={"ptr": PTR + 16})
    assert [f.rule for f in judge(ev.events)] == ["freed-memory-used"]
    ev.driver("cuMemMap", 70, context=PRIMARY, line=7)  # a mapping the allocation map does not follow
    assert not judge(ev.events)


def test_another_threads_allocation_under_way_during_a_free_is_not_the_freed_block():
    """Thread B's cuMemAlloc starts before thread A frees P and returns P after it: B's block is live."""
    ev = Events()
    allocated(ev, start=50, line=5)
    ev.driver("cuMemAlloc_v2", 95, end=130, tid=WORKER, context=PRIMARY, line=20, args={"ptr": PTR, "size": 4096})
    ev.driver("cuMemFree_v2", 100, end=110, context=PRIMARY, line=6, args={"ptr": PTR})
    ev.driver("cuMemsetD32_v2", 150, tid=WORKER, context=PRIMARY, line=21, args={"ptr": PTR})
    assert not judge(ev.events)


def test_a_state_the_driver_documents_is_not_a_failure():
    ev = Events()
    ev.runtime("cudaDeviceEnablePeerAccess", 60, context=PRIMARY, status="cudaErrorPeerAccessAlreadyEnabled", line=6)
    ev.driver("cuCtxEnablePeerAccess", 80, context=PRIMARY, status="CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", line=7)
    assert not judge(ev.events)
    ev.driver("cuCtxEnablePeerAccess", 90, context=PRIMARY, status="CUDA_ERROR_INVALID_DEVICE", line=8)
    assert [f.rule for f in judge(ev.events)] == ["failed-call"]


def test_an_allocation_the_library_retried_successfully_was_handled():
    def stream(retry_status: str):
        ev = Events()
        ev.driver("cuMemAlloc_v2", 60, context=PRIMARY, status="CUDA_ERROR_OUT_OF_MEMORY", line=6,
                  args={"size": 1 << 30})
        ev.driver("cuMemFree_v2", 70, context=PRIMARY, line=6, args={"ptr": PTR})
        ev.driver("cuMemAlloc_v2", 80, context=PRIMARY, status=retry_status, line=6,
                  args={"size": 1 << 30, "ptr": PTR})
        return ev.events

    from ctxlab.audit.engine import Stream
    from ctxlab.audit.rules.failures import probes

    events = stream("CUDA_SUCCESS")
    assert not [f for f in judge(events) if f.rule == "out-of-memory"]
    assert [p["call"] for p in probes(Stream(events))] == ["cuMemAlloc_v2"]
    assert [f.rule for f in judge(stream("CUDA_ERROR_OUT_OF_MEMORY"))] == ["out-of-memory"]
