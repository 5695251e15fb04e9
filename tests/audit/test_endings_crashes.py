"""A crash placed on any thread (issue 47 item 4): CUDA's host-function thread running a Python host function
that aborts, a C library's thread without Python that aborts after its CUDA calls, a thread a C library started
that calls back into Python and segfaults. Each is named as the OS names it, with its last CUDA calls and the
user's line that started its work; a library's handled probe beside it stays info."""

import pytest

from ctxlab.audit.engine import RunInfo, Stream
from ctxlab.audit.rules.catalogue import judge
from ctxlab.audit.rules.failures import probes
from ctxlab.tracing.frames import shown
from ctxlab.tracing.stacks_dump import StacksDump, ThreadStack
from tests.audit_events import MAIN, PRIMARY, Events, stack

HOSTFN, WATCHDOG, PROGRESS = 303, 404, 505
MAIN_IDENT, FOREIGN_IDENT = 0x7F0100, 0x7F0900
STREAM_A = 0xA0
ABORT = {"how": "signal", "signal": "SIGABRT", "program_ended": False}
SEGV = {"how": "signal", "signal": "SIGSEGV", "program_ended": False}


@pytest.fixture
def app(tmp_path) -> str:
    """A user file that exists (faulthandler's frames count as the user's only where their file does)."""
    path = tmp_path / "app.py"
    path.write_text("# the audited program\n")
    return str(path)


def run_of(ending, threads, fatal=(), exits=()) -> RunInfo:
    return RunInfo(ending=ending, fatal=list(fatal), exits=list(exits), idents={MAIN: MAIN_IDENT},
                   threads={MAIN: "MainThread", **threads})


def main_waiting(app: str) -> ThreadStack:
    return ThreadStack(MAIN_IDENT, False, [[app, 70, "main"]])


def host_function_crash(app: str, ev: Events) -> RunInfo:
    """A Python host function on CUDA's own thread calls os.abort(): faulthandler's current thread is one Python
    did not start, and the audit's os.abort note gives its OS id."""
    ev.driver("cuLaunchHostFunc", 100, context=PRIMARY, line=30, args={"stream": STREAM_A})
    dump = StacksDump("Aborted", [ThreadStack(FOREIGN_IDENT, True, [[app, 12, "on_batch_done"]]), main_waiting(app)])
    note = {"call": "os.abort", "args": "", "tid": HOSTFN, "thread": "Dummy-1", "stack": [[shown(app), 12,
                                                                                            "on_batch_done"]]}
    return run_of(ABORT, {HOSTFN: "cuda00001400006 (303)"}, fatal=[dump], exits=[note])


def test_an_abort_in_a_host_function_is_placed_on_cudas_thread_with_the_launch_that_queued_it(app):
    ev = Events()
    (f,) = judge(ev.events, run=host_function_crash(app, ev))
    assert f.rule == "program-crashed" and f.thread == "cuda00001400006 (303)" and f.location.line == 12
    assert "a thread the program did not start" in f.message
    assert ("it was running the host function queued by cuLaunchHostFunc on thread MainThread at app.py:30"
            in f.message)
    assert [(what, loc.line) for what, loc in f.related] == [("host function queued at", 30)]


def test_a_host_function_a_later_sync_saw_finish_is_not_the_one_running(app):
    ev = Events()
    run = host_function_crash(app, ev)
    ev.driver("cuStreamSynchronize", 150, context=PRIMARY, line=31, args={"stream": STREAM_A})
    (f,) = judge(ev.events, run=run)
    assert "host function queued" not in f.message and f.thread == "cuda00001400006 (303)"


def watchdog_abort(ev: Events, with_stack: bool = True) -> RunInfo:
    """A C library's watchdog thread (no Python) polls an event and aborts: faulthandler names no current
    thread, no note is written; its calls carry the stack of the Python thread that asked the library."""
    ev.driver("cuStreamCreate", 40, context=PRIMARY, line=8, args={"stream": STREAM_A})
    for i, start in enumerate((100, 200, 300)):
        extra = {"stack": stack(9), "asked_by": "MainThread"} if with_stack and i == 0 else {}
        ev.driver("cuEventQuery", start, tid=WATCHDOG, context=PRIMARY, status="CUDA_ERROR_NOT_READY", **extra)
    dump = StacksDump("Aborted", [ThreadStack(MAIN_IDENT, False, [["/usr/lib/python3.12/threading.py", 1, "wait"]])])
    return run_of(ABORT, {WATCHDOG: "nccl-watchdog (404)"}, fatal=[dump])


def test_an_abort_on_a_c_librarys_thread_names_it_its_last_calls_and_the_line_that_started_its_work():
    ev = Events()
    (f,) = judge(ev.events, run=watchdog_abort(ev))
    assert f.rule == "program-crashed" and f.thread == "nccl-watchdog (404)" and f.location.line == 9
    assert "this is the only thread without Python that made CUDA calls" in f.message
    assert "after its last CUDA call, cuEventQuery (CUDA_ERROR_NOT_READY)" in f.message
    assert "and before it cuEventQuery (CUDA_ERROR_NOT_READY), cuEventQuery" in f.message
    assert "its last call with a Python stack was cuEventQuery, asked for by thread MainThread at app.py:9" in (
        f.message)


def test_with_no_stack_on_its_calls_the_line_is_the_last_call_with_one_before_the_thread_began():
    ev = Events()
    (f,) = judge(ev.events, run=watchdog_abort(ev, with_stack=False))
    assert f.location.line == 8 and "before its first was cuStreamCreate on thread MainThread at app.py:8" in f.message


def test_the_query_answers_on_the_watchdog_are_no_finding_beside_the_crash():
    ev = Events()
    run = watchdog_abort(ev)
    ev.runtime("cudaGetDeviceCount", 50, end=60, context=PRIMARY, line=7)  # a probe the runtime handled
    ev.driver("cuDeviceGetAttribute", 52, end=54, context=PRIMARY, status="CUDA_ERROR_INVALID_VALUE",
              **{"from": "callback"})
    assert [f.rule for f in judge(ev.events, run=run)] == ["program-crashed"]
    assert [p["call"] for p in probes(Stream(ev.events))] == ["cuDeviceGetAttribute"]


def test_a_segfault_on_a_c_started_thread_calling_back_into_python_is_found_by_its_code(app):
    """A thread made with pthread_create through ctypes runs a Python callback: faulthandler's current thread is
    not one Python started; the thread whose recorded calls came from the same function is."""
    ev = Events()
    where = [[shown(app), 48, "progress_loop"]]
    ev.driver("cuStreamQuery", 100, tid=PROGRESS, context=PRIMARY, stack=where)
    dump = StacksDump("Segmentation fault", [ThreadStack(FOREIGN_IDENT, True, [[app, 51, "poll_once"],
                                                                              [app, 47, "progress_loop"]]),
                                             main_waiting(app)])
    (f,) = judge(ev.events, run=run_of(SEGV, {PROGRESS: "gpu-progress (505)"}, fatal=[dump]))
    assert f.thread == "gpu-progress (505)" and f.location.line == 51
    assert "the thread whose CUDA calls came from the same code" in f.message
    assert "after its last CUDA call, cuStreamQuery (CUDA_SUCCESS)" in f.message


def test_a_main_module_frame_is_no_clue_to_which_thread_crashed(app):
    ev = Events()
    ev.driver("cuStreamQuery", 100, tid=PROGRESS, context=PRIMARY, stack=[[shown(app), 99, "<module>"]])
    dump = StacksDump("Segmentation fault", [ThreadStack(FOREIGN_IDENT, True, [[app, 99, "<module>"]])])
    (f,) = judge(ev.events, run=run_of(SEGV, {PROGRESS: "gpu-progress (505)"}, fatal=[dump]))
    assert f.thread == f"thread {FOREIGN_IDENT:#x}" and "cuStreamQuery" not in f.message


def test_a_crash_on_a_thread_python_started_is_reported_as_before(app):
    ev = Events()
    ev.driver("cuStreamQuery", 100, context=PRIMARY, line=40)
    dump = StacksDump("Segmentation fault", [ThreadStack(MAIN_IDENT, True, [[app, 42, "crash_here"]])])
    (f,) = judge(ev.events, run=run_of(SEGV, {}, fatal=[dump]))
    assert f.thread == "MainThread" and "did not start" not in f.message
    assert "after its last CUDA call, cuStreamQuery (CUDA_SUCCESS)" in f.message


def test_a_segfault_on_a_thread_no_record_ties_to_an_os_thread_is_still_placed_at_the_host_functions_launch(app):
    """CUDA's host-function thread makes no CUDA call and left no note: its id is none of Python's threads."""
    ev = Events()
    ev.driver("cuLaunchHostFunc", 100, context=PRIMARY, line=30, args={"stream": STREAM_A})
    dump = StacksDump("Segmentation fault", [ThreadStack(FOREIGN_IDENT, True, [[app, 12, "on_downloaded"]]),
                                             main_waiting(app)])
    (f,) = judge(ev.events, run=run_of(SEGV, {}, fatal=[dump]))
    assert f.thread == f"thread {FOREIGN_IDENT:#x}" and f.location.line == 12
    assert "a thread the program did not start (its thread id is none of the threads Python started)" in f.message
    assert "host function queued by cuLaunchHostFunc on thread MainThread at app.py:30" in f.message


def test_a_crash_in_a_host_function_has_its_launch_as_its_cause(app):
    ev = Events()
    (f,) = judge(ev.events, run=host_function_crash(app, ev))
    assert f.because.in_record and f.because.location.line == 30 and "host function that was running" in (
        f.because.what)
