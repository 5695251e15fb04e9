"""The program in a child, the judge in the parent (ctxlab.tracing.supervise), on the CPU: the child runs the
program untraced (mode ``run``) and the parent tells how it ended however it ended, with faulthandler's stacks
of every thread where the process died by a signal or was stopped at the time limit; and faulthandler's text
as the parent reads it."""

import signal
import textwrap

import pytest

from ctxlab.tracing.stacks_dump import parse_dump
from ctxlab.tracing.supervise import Ending, run_supervised

pytestmark = pytest.mark.alone  # run once, alone (tests/house/test_each_file_alone.py)


def run(code: str, **kw):
    return run_supervised("run", code=textwrap.dedent(code), **kw)


def test_an_exit_status_passes_through_and_nothing_is_left_behind(tmp_path):
    done = run("import sys; sys.exit(5)")
    assert (done.ending.how, done.ending.exit_status, done.ending.status) == ("exit", 5, 5)
    assert done.ending.program_ended and done.flight is None and "no flight recording" in done.unreadable
    keep = tmp_path / "kept"
    run("pass", keep=str(keep))
    assert (keep / "result.json").exists() and (keep / "spec.json").exists()


def test_os_exit_is_an_exit_without_the_programs_end():
    done = run("import os; os._exit(3)")
    assert (done.ending.how, done.ending.exit_status) == ("exit", 3) and not done.ending.program_ended


def test_a_segfault_is_a_signal_with_the_crashing_threads_stack():
    done = run("""
        import ctypes, threading, time
        def idle():
            time.sleep(30)
        threading.Thread(target=idle, name="idler", daemon=True).start()
        def crash():
            ctypes.string_at(0)
        crash()
    """)
    assert (done.ending.how, done.ending.signal, done.ending.status) == ("signal", "SIGSEGV", 139)
    assert "died by SIGSEGV while running" in done.ending.detail
    (dump,) = done.fatal
    assert "Segmentation fault" in dump.reason and len(dump.threads) == 2
    current = dump.current()
    assert current is not None and [f[2] for f in current.frames[:2]] == ["string_at", "crash"]
    assert current.user_frames()[0][:2] == ["<string>", 7]


def test_sigkill_from_outside_leaves_no_python_stack_but_is_told():
    done = run("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert (done.ending.how, done.ending.signal) == ("signal", "SIGKILL") and done.fatal == []


def test_past_the_time_limit_every_threads_stack_is_taken_then_it_is_killed():
    done = run("""
        import threading, time
        lock = threading.Lock()
        lock.acquire()
        def wait():
            lock.acquire()
        threading.Thread(target=wait, name="waiter").start()
        time.sleep(60)
    """, timeout=2)
    assert done.ending.how == "timeout" and done.ending.signal == "SIGKILL" and 2 <= done.ending.seconds < 20
    assert "ran past the time limit of 2 s" in done.ending.detail
    (dump,) = done.dumps
    functions = {f[2] for t in dump.threads for f in t.frames}
    assert {"wait", "<module>"} <= functions and len(dump.threads) == 2


def test_no_limit_means_the_program_runs_to_its_end():
    done = run("import time; time.sleep(1.5)", timeout=0, stall=0)
    assert done.ending.how == "exit" and done.ending.exit_status == 0


def test_a_missing_script_is_refused_before_a_child_starts():
    with pytest.raises(FileNotFoundError):
        run_supervised("run", argv=["no/such/program.py"])


def test_the_status_of_an_ending_is_what_a_shell_sees():
    assert Ending("exit", 0).status == 0 and Ending("signal", None, "SIGABRT").status == 128 + signal.SIGABRT
    assert Ending("timeout", None, "SIGKILL").status == 137 and Ending("signal", None, "weird").status == 1


FATAL = """Fatal Python error: Aborted

Thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.12/threading.py", line 355 in wait
  File "app.py", line 12 in worker

Current thread 0x00007f0000000002 (most recent call first):
  File "app.py", line 30 in main
  File "app.py", line 40 in <module>

Extension modules: numpy (total: 1)
"""


def test_faulthandlers_text_is_read_thread_by_thread():
    (dump,) = parse_dump(FATAL)
    assert dump.reason == "Aborted" and [t.ident for t in dump.threads] == [0x7F0000000001, 0x7F0000000002]
    current = dump.current()
    assert current is not None and current.frames == [["app.py", 30, "main"], ["app.py", 40, "<module>"]]
    assert not dump.threads[0].current and dump.threads[0].frames[1] == ["app.py", 12, "worker"]


def test_two_requests_in_one_file_are_two_dumps_and_junk_is_ignored():
    request = FATAL.replace("Fatal Python error: Aborted\n\n", "")
    dumps = parse_dump(request + "garbage line\n" + request)
    assert len(dumps) == 2 and all(d.reason == "" for d in dumps) and all(len(d.threads) == 2 for d in dumps)
    assert parse_dump("") == [] and parse_dump("nothing here\n  File \"x\", line 1 in y\n") == []


def _in_a_call_program(before: float, inside: float) -> str:
    """A program that records into the audit's recording itself (the C callback, driven as CUPTI would), works
    ``before`` seconds without any call, then stays ``inside`` seconds inside one call."""
    return textwrap.dedent(f"""
        import ctypes, os, sys, time
        sys.path.insert(0, os.environ["CTXLAB_TEST_ROOT"])
        from tests.audit.test_flight_recorder import Call, open_flight
        lib, files, sink = open_flight(os.environ["CTXLAB_TEST_FLIGHT"])
        end = time.monotonic() + {before}
        while time.monotonic() < end:
            pass
        c = Call(1)
        lib.ctxlab_callback(None, 1, 7, ctypes.byref(c.enter))
        time.sleep({inside})
        lib.ctxlab_callback(None, 1, 7, ctypes.byref(c.exit))
    """)


def _flight_env(folder) -> dict:
    import os

    return {"CTXLAB_TEST_ROOT": os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
            "CTXLAB_TEST_FLIGHT": str(folder)}


def test_a_thread_inside_one_call_with_nothing_returning_is_a_stall(tmp_path):
    done = run(_in_a_call_program(0, 30), stall=1.5, keep=str(tmp_path), env=_flight_env(tmp_path))
    assert done.ending.how == "stall" and done.ending.seconds < 15
    assert done.flight is not None and [c.call for c in done.flight.open_calls] == ["cuStreamSynchronize"]
    assert done.dumps, "every thread's stack is taken before the child is killed"


def test_a_short_call_after_a_long_stretch_without_calls_is_no_stall(tmp_path):
    done = run(_in_a_call_program(3, 0.6), stall=1.5, keep=str(tmp_path), env=_flight_env(tmp_path))
    assert done.ending.how == "exit" and done.ending.exit_status == 0
