"""The C callback reads a calling thread's frames in place (``ctxlab.tracing.native.frames``): without the GIL
and without asking the stack thread, once the flight file holds the frames' code objects; the layout is checked
against a known frame before it is used, a frame of a code object not held goes down the older paths, and many
threads calling at once each get their own line."""

import ctypes
import sys
import threading

import pytest

from ctxlab.tracing import native
from ctxlab.tracing.flight import read_flight
from ctxlab.tracing.native import frames
from tests.audit.test_flight_recorder import flight, open_flight  # noqa: F401 (the fixture)
from tests.audit.test_flight_recorder import pytestmark as needs_compiler
from tests.fake_cupti import Call

pytestmark = [needs_compiler, pytest.mark.skipif(
    frames.layout() is None, reason=f"no known frame layout for this Python ({sys.version.split()[0]})")]


HELD = 999_999  # the correlation of the call that holds the codes


def counts(lib) -> dict[str, int]:
    return native.counts(lib)


def released_call(lib, c: Call, gil: bool = False) -> None:
    """A driver call made with the GIL released (ctypes.CDLL lets it go), as CuPy makes its launches; with
    ``gil``, one made holding it (ctypes.PyDLL), as PyTorch makes its calls."""
    callback = held(lib) if gil else lib.ctxlab_callback
    callback(None, 1, 5, ctypes.byref(c.enter))
    callback(None, 1, 5, ctypes.byref(c.exit))


def held(lib):
    function = ctypes.PyDLL(lib._name).ctxlab_callback
    function.argtypes, function.restype = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p], None
    return function


def hold_here(lib) -> None:
    """Hold this test's frames and released_call's code, as the stack thread does at a snapshot."""
    frames.hold_codes(lib, sys._getframe(1))
    released_call(lib, Call(HELD), gil=True)  # walked with the GIL: released_call's code is held from here


@pytest.fixture()
def in_place(flight):  # noqa: F811
    lib, files, sink = flight
    lib.ctxlab_set_want(1, 5, native.WANT_STACK)
    assert frames.read_in_place(lib)
    return lib, files


def test_a_call_with_the_gil_released_is_read_in_place_at_its_own_line(in_place):
    lib, files = in_place
    hold_here(lib)
    before = counts(lib)
    first, second = Call(1), Call(2)
    released_call(lib, first); line = sys._getframe().f_lineno  # noqa: E702 (the call's line, read on it)
    released_call(lib, second)
    after = counts(lib)
    assert after["stacks_read_in_place"] - before["stacks_read_in_place"] == 2
    assert after["stack_requests"] == before["stack_requests"]  # nothing asked of the stack thread
    got = read_flight(files).events[1:]
    assert [(e["stack"][1][0].rsplit("/", 1)[-1], e["stack"][1][2]) for e in got] == [
        ("test_frames_in_place.py", "test_a_call_with_the_gil_released_is_read_in_place_at_its_own_line")] * 2
    assert [e["stack"][0][2] for e in got] == ["released_call"] * 2
    assert [e["stack"][1][1] for e in got] == [line, line + 1]


def test_calls_from_one_line_share_one_stack(in_place):
    lib, files = in_place
    hold_here(lib)
    for i in range(50):
        released_call(lib, Call(i))
    got = read_flight(files)
    assert got.counts["stacks"] == 2  # the held call's, and one for the 50 released ones
    assert counts(lib)["stacks_read_in_place"] == 1
    assert len(got.events) == 51


def test_a_frame_whose_code_is_not_held_takes_the_older_path(in_place):
    lib, files = in_place
    # nothing held, no stack thread: the call is not read in place (its stack says why there is none)
    released_call(lib, Call(1))
    assert counts(lib)["stacks_read_in_place"] == 0
    (event,) = read_flight(files).events
    assert "stack" not in event and "stack thread was not running" in event["stack_missing"], event


def test_a_new_recording_holds_its_own_codes(tmp_path, in_place):
    lib, _ = in_place
    hold_here(lib)
    (tmp_path / "second").mkdir()
    lib2, files2, sink2 = open_flight(tmp_path / "second")  # the codes are named anew in a new file
    try:
        lib2.ctxlab_set_want(1, 5, native.WANT_STACK)
        released_call(lib2, Call(1))
        assert counts(lib2)["stacks_read_in_place"] == 0
    finally:
        lib2.ctxlab_set_active(0)
        sink2.close()


@pytest.mark.parametrize("broken", ["line", "caller", "code offset"])
def test_a_layout_that_does_not_match_the_known_frame_is_refused(flight, broken):  # noqa: F811
    lib, _, _ = flight
    layout = list(frames.layout())
    if broken == "code offset":
        layout[2] += 8  # another field of the same frame: readable, not the code object
    offsets = (ctypes.c_int32 * 8)(*layout)
    api = ctypes.pythonapi
    here = sys._getframe()
    caller = id(here.f_code) if broken == "caller" else id(here.f_back.f_code)
    shift = 1 if broken == "line" else 0
    check = lib.ctxlab_read_frames_in_place
    a2l, inc = native.address(api.PyCode_Addr2Line), native.address(api.Py_IncRef)
    assert check(offsets, a2l, inc, id(here.f_code), sys._getframe().f_lineno + shift, caller) == 0
    lib.ctxlab_set_want(1, 5, native.WANT_STACK)
    hold_here(lib)
    released_call(lib, Call(1))
    assert counts(lib)["stacks_read_in_place"] == 0  # refused: the older paths only


def test_the_switch_keeps_the_older_paths(monkeypatch):
    monkeypatch.setenv(frames.OFF_SWITCH, "snapshot")
    assert frames.layout() is None


def test_many_threads_calling_at_once_each_get_their_own_line(in_place):
    lib, files = in_place
    threads, per_thread = 16, 100
    barrier = threading.Barrier(threads)

    def work(k: int) -> None:
        hold_here(lib)
        calls = [Call(k * per_thread + i) for i in range(per_thread)]
        barrier.wait()
        for c in calls:
            if k % 2:
                released_call(lib, c)
            else:
                released_call(lib, c); released_call(lib, Call(0))  # noqa: E702 (two calls, one line)

    workers = [threading.Thread(target=work, args=(k,), name=f"w{k}") for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    events = [e for e in read_flight(files).events if e["correlation"] != HELD]
    assert len(events) == threads * per_thread * 3 // 2
    assert all(e["stack"][1][2].endswith("work") for e in events)
    odd = {tuple(map(tuple, e["stack"])) for e in events if e["correlation"] // per_thread % 2}
    even = {tuple(map(tuple, e["stack"])) for e in events if not e["correlation"] // per_thread % 2}
    assert len(odd) == 1 and len(even) == 1 and odd != even
    assert counts(lib)["stack_requests"] == 0
