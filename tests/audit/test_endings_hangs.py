"""A hang is a hang however the program ends (issue 47 item 3): stopped by the audit, ended by its own os._exit,
by an exit from C (faulthandler.dump_traceback_later(..., exit=True) calls _exit: no os._exit is seen), by
SIGALRM's default action, SIGTERM or SIGKILL, or by an abort while another thread was stuck. Stuck is decided
from evidence (the call still open at the end, inside for a while, or threads blocked on each other with no
progress), and the report says what the blocked call waits for."""

from ctxlab.audit.engine import RunInfo
from ctxlab.audit.rules.catalogue import judge
from ctxlab.tracing.flight import OpenCall
from tests.audit_events import MAIN, PRIMARY, WORKER, Events, stack

STREAM_A, STREAM_B = 0xA0, 0xB0
EVENT_E = 0xE0
F_SPIN = 0xF1
C_EXIT = {"how": "exit", "exit_status": 1, "program_ended": False, "detail": "ended by itself"}


def rules(found):
    return sorted(f.rule for f in found)


def inside(tid=MAIN, call="cuStreamSynchronize", arg=STREAM_A, line=55, inner=None) -> OpenCall:
    return OpenCall(tid=tid, thread={MAIN: "MainThread", WORKER: "worker"}[tid], call=call, inner=inner or call,
                    since=300, inner_since=300, context=PRIMARY, held_gil=False, stack=stack(line), inner_arg=arg)


def ended(ending: dict, calls: list, seconds: dict | None = None, exits=()) -> RunInfo:
    return RunInfo(ending=ending, open_calls=calls, exits=list(exits),
                   seconds_inside=seconds if seconds is not None else {c.tid: 4.0 for c in calls},
                   threads={MAIN: "MainThread", WORKER: "worker"}, kernels={F_SPIN: "spin"})


def spin_queued(ev: Events, stream=STREAM_A, start=100, line=20) -> dict:
    return ev.driver("cuLaunchKernel", start, context=PRIMARY, line=line, args={"function": F_SPIN, "stream": stream})


# ---------------------------------------------------------------- however it ends

def test_an_exit_from_c_with_a_thread_stuck_is_a_hang_report():
    """faulthandler.dump_traceback_later(..., exit=True): C's _exit, so no os._exit note and no result."""
    ev = Events()
    spin_queued(ev)
    (f,) = judge(ev.events, run=ended(C_EXIT, [inside()]))
    assert f.rule == "program-hung" and f.location.line == 55 and f.thread == "MainThread"
    assert "ended itself without returning while threads were stuck inside CUDA calls" in f.message
    assert "faulthandler.dump_traceback_later" in f.message and "for 4.0 s" in f.message
    assert "It waits for work launched before it that never finished: kernel spin on stream 0xa0" in f.message


def test_a_program_that_returned_is_no_hang_whatever_its_daemon_thread_was_inside():
    run = ended({**C_EXIT, "exit_status": 0, "program_ended": True}, [inside(tid=WORKER)])
    assert not judge([], run=run)


def test_os_exit_with_no_call_open_is_no_hang():
    note = {"call": "os._exit", "args": "1", "tid": WORKER, "thread": "worker", "stack": stack(80)}
    assert not judge([], run=ended({"how": "exit", "exit_status": 1, "program_ended": False}, [], exits=[note]))


def test_os_exit_by_the_programs_watchdog_names_where_it_was_called():
    note = {"call": "os._exit", "args": "3", "tid": WORKER, "thread": "worker", "stack": stack(80)}
    (f,) = judge([], run=ended({"how": "exit", "exit_status": 3, "program_ended": False}, [inside()], exits=[note]))
    assert f.rule == "program-hung" and f.thread == "MainThread"
    assert "ended itself with os._exit while threads were stuck inside CUDA calls (os._exit(3) on thread worker " \
           "at app.py:80)" in f.message


def test_sigalrms_default_action_ending_a_stuck_program_is_a_hang_not_a_crash():
    ending = {"how": "signal", "signal": "SIGALRM", "program_ended": False, "detail": "died by SIGALRM while running"}
    (f,) = judge([], run=ended(ending, [inside()]))
    assert f.rule == "program-hung" and "was ended by SIGALRM (its default action: a signal.alarm" in f.message


def test_sigterm_from_outside_on_a_stuck_program_is_a_hang_and_with_nothing_stuck_a_crash_as_before():
    ending = {"how": "signal", "signal": "SIGTERM", "program_ended": False}
    (f,) = judge([], run=ended(ending, [inside()]))
    assert f.rule == "program-hung" and "was ended by SIGTERM (from outside the program" in f.message
    assert rules(judge([], run=ended(ending, [inside()], seconds={MAIN: 0.4}))) == ["program-crashed"]
    assert rules(judge([], run=ended(ending, []))) == ["program-crashed"]


def test_a_sigkill_the_programs_watchdog_sends_is_both_its_crash_and_the_hang():
    note = {"call": "os.kill", "args": "4242, SIGKILL", "tid": WORKER, "thread": "worker", "stack": stack(81)}
    ending = {"how": "signal", "signal": "SIGKILL", "program_ended": False}
    found = judge([], run=ended(ending, [inside()], exits=[note]))
    assert rules(found) == ["program-crashed", "program-hung"]
    hung = next(f for f in found if f.rule == "program-hung")
    assert "sent by the program itself (os.kill(4242, SIGKILL) on thread worker at app.py:81)" in hung.message


def test_an_abort_from_a_watchdog_while_another_thread_is_stuck_is_the_crash_and_the_hang():
    note = {"call": "os.abort", "args": "", "tid": WORKER, "thread": "worker", "stack": stack(82)}
    ending = {"how": "signal", "signal": "SIGABRT", "program_ended": False}
    found = judge([], run=ended(ending, [inside()], exits=[note]))
    assert rules(found) == ["program-crashed", "program-hung"]
    crash = next(f for f in found if f.rule == "program-crashed")
    assert crash.thread == "worker" and crash.location.line == 82


def test_a_crash_inside_the_stuck_call_itself_is_only_the_crash():
    note = {"call": "os.abort", "args": "", "tid": MAIN, "thread": "MainThread", "stack": stack(55)}
    ending = {"how": "signal", "signal": "SIGABRT", "program_ended": False}
    assert rules(judge([], run=ended(ending, [inside()], exits=[note]))) == ["program-crashed"]


def test_two_threads_blocked_on_each_other_are_stuck_sooner_unless_something_else_returned():
    calls = [inside(), inside(tid=WORKER, call="cuCtxSynchronize", arg=0, line=66)]
    seconds = {MAIN: 1.2, WORKER: 1.5}
    assert rules(judge([], run=ended(C_EXIT, calls, seconds))) == ["program-hung", "program-hung"]
    ev = Events()
    ev.driver("cuEventQuery", 400, end=410, tid=303, context=PRIMARY)  # a third thread went on
    assert not judge(ev.events, run=ended(C_EXIT, calls, seconds))
    assert not judge([], run=ended(C_EXIT, calls[:1], {MAIN: 1.5}))  # one thread, briefly: no evidence


def test_a_call_whose_time_inside_is_unknown_is_not_judged_stuck():
    assert not judge([], run=ended(C_EXIT, [inside()], seconds={}))


# ---------------------------------------------------------------- what it waits for

def test_a_cuda_free_stuck_in_its_implicit_device_sync_waits_for_the_host_function_and_the_kernel():
    ev = Events()
    ev.driver("cuLaunchHostFunc", 90, context=PRIMARY, line=18, args={"stream": STREAM_B})
    spin_queued(ev, stream=STREAM_A, start=100)
    (f,) = judge(ev.events, run=ended(C_EXIT, [inside(call="cudaFree", inner="cuMemFree_v2", arg=0)]))
    assert "a host function launched with cuLaunchHostFunc on thread MainThread at app.py:18" in f.message
    assert "kernel spin on stream 0xa0" in f.message
    assert "cudaFree synchronises the device implicitly" in f.message
    assert [loc.line for _what, loc in f.related] == [18, 20]


def test_a_free_async_is_no_implicit_sync():
    ev = Events()
    spin_queued(ev)
    (f,) = judge(ev.events, run=ended(C_EXIT, [inside(call="cuMemFreeAsync", arg=0)]))
    assert "It waits for" not in f.message and "implicitly" not in f.message


def test_a_synchronous_copy_on_the_legacy_default_stream_waits_for_every_blocking_stream():
    ev = Events()
    spin_queued(ev, stream=STREAM_B)
    (f,) = judge(ev.events, run=ended(C_EXIT, [inside(call="cudaMemcpy", inner="cuMemcpyHtoD_v2", arg=0)]))
    assert "kernel spin on stream 0xb0" in f.message and "legacy default stream" in f.message


def test_a_stream_sync_waits_only_for_its_own_streams_work_since_its_last_sync():
    ev = Events()
    spin_queued(ev, stream=STREAM_B, line=19)
    ev.driver("cuStreamWaitValue32_v2", 110, context=PRIMARY, line=21, args={"stream": STREAM_A})
    (f,) = judge(ev.events, run=ended(C_EXIT, [inside(arg=STREAM_A)]))
    assert "cuStreamWaitValue32_v2 on thread MainThread at app.py:21 (the stream waits on the GPU for memory" in (
        f.message)
    assert "0xb0" not in f.message and "returns when the work queued on stream 0xa0 is done" in f.message
    ev.driver("cuStreamSynchronize", 200, context=PRIMARY, line=22, args={"stream": STREAM_A})
    (f,) = judge(ev.events, run=ended(C_EXIT, [inside(arg=STREAM_A)]))
    assert "It waits for" not in f.message


def test_an_event_sync_waits_for_the_stream_the_event_was_recorded_on():
    ev = Events()
    spin_queued(ev, stream=STREAM_B)
    ev.driver("cuEventRecord", 120, context=PRIMARY, line=23, args={"event": EVENT_E, "stream": STREAM_B})
    (f,) = judge(ev.events, run=ended(C_EXIT, [inside(call="cuEventSynchronize", arg=EVENT_E)]))
    assert "kernel spin on stream 0xb0" in f.message and "before event 0xe0 was recorded at app.py:23" in f.message


def test_a_blocking_streams_sync_waits_for_a_host_function_on_the_legacy_default_stream_its_cause():
    ev = Events()
    ev.runtime("cudaLaunchHostFunc", 90, context=PRIMARY, line=17, args={"stream": 0})
    ev.driver("cuMemsetD32Async_v2", 100, context=PRIMARY, line=18, args={"stream": STREAM_A})
    (f,) = judge(ev.events, run=ended({"how": "signal", "signal": "SIGALRM", "program_ended": False}, [inside()]))
    assert ("a host function launched with cudaLaunchHostFunc on the legacy default stream on thread MainThread "
            "at app.py:17") in f.message
    assert f.because.in_record and f.because.location.line == 17 and "never finished" in f.because.what
    ev.events[0]["args"] = {"stream": STREAM_B}  # another stream's host function: not waited for
    (f,) = judge(ev.events, run=ended({"how": "signal", "signal": "SIGALRM", "program_ended": False}, [inside()]))
    assert "host function" not in f.message and not f.because.in_record


def test_a_hang_waiting_on_the_gpu_has_the_wait_as_its_cause():
    ev = Events()
    ev.driver("cuStreamWaitValue32_v2", 110, context=PRIMARY, line=21, args={"stream": STREAM_A})
    spin_queued(ev, stream=STREAM_A, start=120, line=22)
    (f,) = judge(ev.events, run=ended(C_EXIT, [inside(arg=STREAM_A)]))
    assert f.because.location.line == 21 and f.because.call.startswith("cuStreamWaitValue32_v2")


def test_a_gpu_wait_whose_stream_the_record_does_not_keep_counts_for_a_stream_sync():
    ev = Events()
    ev.driver("cuStreamWaitValue32_v2", 110, context=PRIMARY, line=21)  # no kept parameters
    (f,) = judge(ev.events, run=ended(C_EXIT, [inside(arg=STREAM_A)]))
    assert "cuStreamWaitValue32_v2 on thread MainThread at app.py:21" in f.message and f.because.location.line == 21
    spin_queued(ev, stream=STREAM_B, start=120, line=22)  # a kernel on another stream is not waited for
    (f,) = judge(ev.events, run=ended(C_EXIT, [inside(arg=STREAM_A)]))
    assert "0xb0" not in f.message
