"""Threads the program did not start are named as the OS names them: the parent reads /proc/PID/task/*/comm
while the child runs (``supervise.OsThreads``), and the audit's stream names their calls, open calls and crash
reports by it (``run._stream``), never over a name Python gave."""

import ctypes
import os
import sys
import threading

import pytest

from ctxlab.audit.run import _stream
from ctxlab.tracing.supervise import Ending, OsThreads, Supervised

linux = pytest.mark.skipif(not sys.platform.startswith("linux") or not os.path.isdir("/proc/self/task"),
                           reason="needs Linux /proc paths")


@linux
def test_a_thread_named_by_its_library_is_read_by_its_os_name_and_renamed_later():
    libc = ctypes.CDLL(None)
    named, rename, renamed, leave = (threading.Event() for _ in range(4))
    tid: dict = {}

    def library_thread() -> None:
        tid["id"] = threading.get_native_id()
        libc.prctl(15, b"nccl-watchdog", 0, 0, 0)  # PR_SET_NAME, as pthread_setname_np does
        named.set()
        rename.wait(10)
        libc.prctl(15, b"renamed", 0, 0, 0)
        renamed.set()
        leave.wait(10)

    t = threading.Thread(target=library_thread, name="python-name")
    t.start()
    try:
        assert named.wait(10)
        names = OsThreads(os.getpid())
        names.poll()
        assert names.names[tid["id"]] == "nccl-watchdog"
        rename.set()
        assert renamed.wait(10)
        names.poll()
        assert names.names[tid["id"]] == "nccl-watchdog"  # a known thread is read again only now and then
        for _ in range(OsThreads.RENAMED_POLLS):
            names.poll()
        assert names.names[tid["id"]] == "renamed"
    finally:
        rename.set()
        leave.set()
        t.join()


@linux
def test_a_threads_pthread_id_is_tied_to_its_os_thread_by_its_stack_mapping():
    """faulthandler and threading name a thread by its pthread_t, which glibc keeps in the thread's stack."""
    waiting, leave = threading.Event(), threading.Event()

    def blocked() -> None:
        waiting.set()
        leave.wait(10)  # in a futex wait: /proc/.../syscall shows its stack pointer

    t = threading.Thread(target=blocked, name="blocked")
    t.start()
    try:
        assert waiting.wait(10)
        names = OsThreads(os.getpid())
        for _ in range(50):
            names.poll()
            if t.native_id in names.stacks:
                break
        if t.native_id not in names.stacks:
            pytest.skip("needs a Linux kernel that shows another thread's stack pointer in /proc/PID/task/TID/syscall")
        assert names.thread_of(t.ident) == t.native_id
        assert names.thread_of(threading.main_thread().ident) != t.native_id
    finally:
        leave.set()
        t.join()


def test_a_process_already_gone_leaves_the_names_read_before():
    names = OsThreads(2 ** 22 + 12345)  # no such process
    names.poll()
    assert names.names == {}


def test_the_stream_names_a_library_threads_calls_by_its_os_name_but_never_over_pythons():
    events = [{"domain": "driver", "name": "cuEventQuery", "tid": 404, "start": 10, "end": 12,
               "status": "CUDA_ERROR_NOT_READY"},
              {"domain": "driver", "name": "cuStreamQuery", "tid": 101, "start": 20, "end": 22,
               "status": "CUDA_SUCCESS", "thread": "MainThread"}]
    sup = Supervised(ending=Ending("signal", None, "SIGABRT"), flight=None, result={},
                     notes=[{"kind": "event", "event": e} for e in events]
                     + [{"kind": "thread", "tid": 101, "ident": 7, "name": "MainThread"}],
                     os_threads={404: "nccl-watchdog", 101: "python3"})
    stream = _stream(sup, [])
    by_name = {e["name"]: e["thread"] for e in stream.calls}
    assert by_name == {"cuEventQuery": "nccl-watchdog (404)", "cuStreamQuery": "MainThread"}
    assert stream.run is not None and stream.run.threads[404] == "nccl-watchdog (404)"
    assert 404 not in stream.run.idents and stream.run.threads[101] == "MainThread"


def test_a_fatal_stack_of_a_thread_python_did_not_start_is_tied_to_its_os_thread_and_named():
    from ctxlab.audit.rules.catalogue import judge_stream
    from ctxlab.tracing.stacks_dump import StacksDump, ThreadStack

    here = os.path.abspath(__file__)
    dump = StacksDump("Segmentation fault", [ThreadStack(0x7F00_0000_9000, True, [[here, 12, "on_batch_done"]]),
                                             ThreadStack(7, False, [[here, 70, "main"]])])
    host = {"domain": "runtime", "name": "cudaLaunchHostFunc", "tid": 101, "start": 10, "end": 12,
            "status": "cudaSuccess", "context": 0x1D2154D0, "stack": [["app.py", 30, "main"]], "args": {"stream": 5}}
    sup = Supervised(ending=Ending("signal", None, "SIGSEGV"), flight=None, result={}, fatal=[dump],
                     notes=[{"kind": "event", "event": host}, {"kind": "thread", "tid": 101, "ident": 7,
                                                                "name": "MainThread"}],
                     os_threads={303: "cuda-hostfn"}, os_stacks={303: (0x7F00_0000_0000, 0x7F00_0001_0000)})
    stream = _stream(sup, [])
    assert dump.threads[0].tid == 303 and dump.threads[1].tid is None
    (f,) = judge_stream(stream)
    assert f.rule == "program-crashed" and f.thread == "cuda-hostfn (303)" and f.location.line == 12
    assert "its stack holds the thread id faulthandler gave" in f.message
    assert "running the host function queued by cudaLaunchHostFunc on thread MainThread at app.py:30" in f.message
