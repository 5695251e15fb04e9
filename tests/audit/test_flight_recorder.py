"""The flight recorder on the CPU: the C callback (driven with CUPTI-shaped data, as in test_native_callback)
writes into a mapped file, and the reader of the parent (ctxlab.tracing.flight) gets the same events the Tracer
makes, whatever became of the process that wrote them: records, the five kept parameters, native callers of a
failing call, thread names, code names of a stack walked with the GIL held, the call each thread is inside, and
what did not fit."""

import ctypes
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading

import pytest

from ctxlab.tracing import native
from ctxlab.tracing.flight import FlightUnreadable, read_flight
from ctxlab.tracing.recorder import RECORDS, FlightFiles, FlightSink
from tests.fake_cupti import Call, open_recording

pytestmark = pytest.mark.skipif(not (os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")),
                                reason="no C compiler here: ctxlab's CUPTI callback is built from C")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAMED = {"driver": {"5": "cuFoo", "7": "cuStreamSynchronize", "9": "cuLaunchKernel"},
         "driver_status": {"201": "CUDA_ERROR_INVALID_CONTEXT", "700": "CUDA_ERROR_ILLEGAL_ADDRESS"}}


def open_flight(folder, records=1 << 12, stacks=1 << 8, size=1 << 20):
    lib, files = open_recording(folder, NAMED, records, stacks, size, failure_stacks=True)
    sink = FlightSink(files)
    sink._lib = lib
    sink.open_notes()
    lib.ctxlab_set_active(1)
    return lib, files, sink


def call(lib, cbid, status=0, params=b"\0" * 64, correlation=1):
    c = Call(correlation, status=status, params=params)
    lib.ctxlab_callback(None, 1, cbid, ctypes.byref(c.enter))
    lib.ctxlab_callback(None, 1, cbid, ctypes.byref(c.exit))


@pytest.fixture()
def flight(tmp_path):
    lib, files, sink = open_flight(tmp_path)
    yield lib, files, sink
    lib.ctxlab_set_active(0)
    sink.close()
    lib.ctxlab_reset()


def test_records_are_read_back_with_names_statuses_and_the_threads_name(flight):
    lib, files, sink = flight
    sink.thread_named(threading.get_native_id(), threading.get_ident(), "MainThread")
    call(lib, 5)
    call(lib, 5, status=201, correlation=2)
    got = read_flight(files)
    assert [(e["name"], e["status"], e["thread"]) for e in got.events] == [
        ("cuFoo", "CUDA_SUCCESS", "MainThread"), ("cuFoo", "CUDA_ERROR_INVALID_CONTEXT", "MainThread")]
    assert got.events[0]["start"] <= got.events[0]["end"] <= got.events[1]["start"]
    assert got.idents[threading.get_native_id()] == threading.get_ident()
    assert got.counts["records"] == 2 and got.counts["dropped_records"] == 0


def test_a_failing_call_keeps_which_shared_object_made_it(flight):
    lib, files, sink = flight
    call(lib, 5, status=201)
    call(lib, 5, correlation=2)
    sink.refresh_maps()
    failing, fine = read_flight(files).events
    assert failing["callers"] and any("ctypes" in c or "ffi" in c or "python" in c for c in failing["callers"])
    assert "callers" not in fine  # success keeps none


def test_five_parameters_are_kept_per_call(flight):
    lib, files, _ = flight
    for i in range(5):  # (site, offset, deref, inner, width): values at 0, 8, ... 32 of the params struct
        lib.ctxlab_set_field(1, 9, 0, 8 * i, 0, 0, 8)
    params = b"".join((0x1000 + i).to_bytes(8, "little") for i in range(5)) + b"\0" * 24
    call(lib, 9, params=params)
    (event,) = read_flight(files).events
    assert event["name"] == "cuLaunchKernel" and event["args"]["function"] == 0x1000
    assert event["args"]["stream"] == 0x1001 and event["args"]["block_z_shared"] == 0x1004


def test_the_call_a_thread_is_inside_is_in_its_slot_until_it_returns(flight):
    lib, files, sink = flight
    sink.thread_named(threading.get_native_id(), threading.get_ident(), "waiter")
    lib.ctxlab_set_field(1, 7, 0, 0, 0, 0, 8)
    c = Call(3, params=(0xABC).to_bytes(8, "little") + b"\0" * 56)
    lib.ctxlab_callback(None, 1, 7, ctypes.byref(c.enter))
    (inside,) = read_flight(files).open_calls
    assert (inside.thread, inside.call, inside.inner_arg, inside.context) == ("waiter", "cuStreamSynchronize", 0xABC,
                                                                               0x1000)
    lib.ctxlab_callback(None, 1, 7, ctypes.byref(c.exit))
    assert read_flight(files).open_calls == []


def test_a_stack_walked_with_the_gil_held_names_its_code_in_the_file(flight):
    lib, files, _ = flight
    lib.ctxlab_set_want(1, 5, native.WANT_STACK)
    held = ctypes.PyDLL(lib._name).ctxlab_callback  # PyDLL keeps the GIL: the C side walks the frames here
    held.argtypes, held.restype = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p], None
    c = Call(4)
    held(None, 1, 5, ctypes.byref(c.enter))
    held(None, 1, 5, ctypes.byref(c.exit))  # this line is the user's frame of the call
    (event,) = read_flight(files).events
    assert event["stack"][0][0].endswith("test_flight_recorder.py")
    assert event["stack"][0][2] == "test_a_stack_walked_with_the_gil_held_names_its_code_in_the_file"


def test_what_does_not_fit_is_counted_not_written_past_the_end(tmp_path):
    lib, files, _ = open_flight(tmp_path, records=3)
    try:
        for i in range(5):
            call(lib, 5, correlation=i + 1)
        got = read_flight(files)
        assert len(got.events) == 3 and got.counts["dropped_records"] == 2
    finally:
        lib.ctxlab_set_active(0)
        lib.ctxlab_flight_close()
        lib.ctxlab_reset()


def test_the_reader_refuses_what_is_not_a_recording(tmp_path):
    files = FlightFiles(str(tmp_path))
    with pytest.raises(FlightUnreadable, match="no flight recording"):
        read_flight(files)
    (tmp_path / RECORDS).write_bytes(b"")
    with pytest.raises(FlightUnreadable, match="empty"):
        read_flight(files)
    (tmp_path / RECORDS).write_bytes(b"\1" * 4096)
    with pytest.raises(FlightUnreadable, match="not a flight recording"):
        read_flight(files)


@pytest.mark.parametrize("death", ["os._exit(3)", "os.kill(os.getpid(), signal.SIGKILL)",
                                   "ctypes.string_at(0)"])
def test_what_a_process_recorded_survives_its_death(tmp_path, death):
    """A process records three calls and one it is inside, then dies (os._exit, SIGKILL, a segfault): the
    parent reads all of it."""
    program = textwrap.dedent(f"""
        import ctypes, os, signal, sys, threading
        sys.path.insert(0, {ROOT!r})
        from tests.audit.test_flight_recorder import Call, call, open_flight
        lib, files, sink = open_flight({str(tmp_path)!r})
        sink.thread_named(threading.get_native_id(), threading.get_ident(), "doomed")
        for i in range(3):
            call(lib, 5, correlation=i + 1)
        c = Call(9)
        lib.ctxlab_callback(None, 1, 7, ctypes.byref(c.enter))
        {death}
    """)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, timeout=60)
    assert done.returncode != 0, done.stderr
    got = read_flight(FlightFiles(str(tmp_path)))
    assert [e["name"] for e in got.events] == ["cuFoo"] * 3 and {e["thread"] for e in got.events} == {"doomed"}
    (inside,) = got.open_calls
    assert inside.call == "cuStreamSynchronize" and inside.thread == "doomed"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork here")
def test_a_forked_child_does_not_write_into_the_parents_recording(flight):
    lib, files, _ = flight
    call(lib, 5)
    pid = os.fork()
    if pid == 0:
        try:
            call(lib, 5, correlation=2)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert len(read_flight(files).events) == 1


def test_after_the_recording_is_closed_records_go_to_the_heap_again(flight):
    lib, files, sink = flight
    call(lib, 5)
    sink.close()
    call(lib, 5, correlation=2)
    assert len(read_flight(files).events) == 1 and native.take_records(lib).size == 1


def test_many_threads_recording_at_once_lose_nothing(flight):
    lib, files, _ = flight
    threads = [threading.Thread(target=lambda: [call(lib, 5) for _ in range(50)], name=f"t{i}") for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = read_flight(files)
    assert len(got.events) == 800 and len({e["tid"] for e in got.events}) == 16
    assert json.dumps(got.counts)


def test_the_recording_is_sized_to_the_room_left_where_it_lies(monkeypatch, tmp_path):
    import shutil as shutil_module

    from ctxlab.tracing import recorder

    whole = recorder.capacities(str(tmp_path))
    monkeypatch.setattr(shutil_module, "disk_usage", lambda folder: type("U", (), {"free": 64 << 20})())
    small = recorder.capacities(str(tmp_path))
    size = small[0] * recorder.RECORD_BYTES + small[1] * recorder.STACK_BYTES + small[2]
    assert size <= 32 << 20 and all(s < w for s, w in zip(small, whole, strict=True))
    assert recorder.RECORD_BYTES == native.__getattr__("RECORD_DTYPE").itemsize


def test_a_slot_an_ended_thread_gave_back_is_taken_by_the_next_thread(flight):
    lib, files, sink = flight

    def one_call():
        call(lib, 5)

    for i in range(3):
        t = threading.Thread(target=one_call, name=f"worker-{i}")
        t.start()
        t.join()
        sink.thread_ended(t.native_id)
    head = native.__getattr__("RECORD_DTYPE")  # the header's slot count: one slot served all three threads
    from ctxlab.tracing.flight import HEADER

    with open(files.path(RECORDS), "rb") as handle:
        fields = HEADER.unpack(handle.read(HEADER.size))
    assert fields[19] == 1 and head.itemsize == 104
